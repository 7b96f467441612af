package testutil

import (
	"bytes"
	"encoding/binary"
)

// RawNPY builds a NumPy .npy file by hand (format major.0, the header dict,
// then data bytes), independently of data/npy's writer, so tests of the
// reader and of the RAG² layout can feed it files it did not write.
func RawNPY(major byte, dict string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.Write([]byte{major, 0})
	h := dict + "\n"
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(h)))
	}
	b.WriteString(h)
	b.Write(data)
	return b.Bytes()
}

// F4Bytes is v as little-endian float32 bytes (.npy dtype '<f4').
func F4Bytes(v ...float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}
