// Package npy reads and writes NumPy .npy files holding float32 matrices
// [N, D] (numpy.lib.format 1.0/2.0/3.0), the format RAG²'s retriever and
// FAISS users keep embeddings in. It imports no other ragforge package.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// npyMagic starts every .npy file (numpy.lib.format).
const npyMagic = "\x93NUMPY"

// Header is the parsed header of a NumPy .npy file, following the format
// of numpy.lib.format (versions 1.0, 2.0 and 3.0): magic "\x93NUMPY", major
// and minor version bytes, header length (uint16 little-endian in 1.0,
// uint32 in 2.0/3.0), and a Python dict literal with the keys 'descr',
// 'fortran_order' and 'shape'.
type Header struct {
	Major, Minor int
	Descr        string // dtype string, e.g. "<f4" (little-endian float32)
	FortranOrder bool
	Shape        []int
	DataOffset   int64 // byte offset of the first element in the file
}

// ReadHeader parses a .npy header from r, leaving r at the first data
// byte. It checks the syntax only (any descr, order and shape); Read adds
// the float32 [N, D] checks. Errors: bad magic, unsupported version, a
// truncated header, a dict that is not a Python literal, missing or extra
// keys (as numpy.lib.format.read_array_header does).
func ReadHeader(r io.Reader) (Header, error) {
	var h Header
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return h, fmt.Errorf("npy header: %w", err)
	}
	if string(pre[:6]) != npyMagic {
		return h, fmt.Errorf("npy header: bad magic %q (not a .npy file)", pre[:6])
	}
	h.Major, h.Minor = int(pre[6]), int(pre[7])
	var hlen int
	switch h.Major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return h, fmt.Errorf("npy header: length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
		h.DataOffset = 10 + int64(hlen)
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return h, fmt.Errorf("npy header: length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
		h.DataOffset = 12 + int64(hlen)
	default:
		return h, fmt.Errorf("npy header: unsupported format version %d.%d (want 1.0, 2.0 or 3.0)", h.Major, h.Minor)
	}
	if h.Minor != 0 {
		return h, fmt.Errorf("npy header: unsupported format version %d.%d (want 1.0, 2.0 or 3.0)", h.Major, h.Minor)
	}
	if hlen > 1<<24 {
		return h, fmt.Errorf("npy header: header length %d is implausibly large", hlen)
	}
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, fmt.Errorf("npy header: %d-byte dict: %w", hlen, err)
	}
	d, err := parseHeaderDict(buf)
	if err != nil {
		return h, fmt.Errorf("npy header: %w", err)
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if _, ok := d[k]; !ok {
			return h, fmt.Errorf("npy header: missing key %q in %s", k, bytes.TrimSpace(buf))
		}
	}
	if len(d) != 3 {
		return h, fmt.Errorf("npy header: unexpected keys in %s (want exactly descr, fortran_order, shape)", bytes.TrimSpace(buf))
	}
	var ok bool
	if h.Descr, ok = d["descr"].(string); !ok {
		return h, fmt.Errorf("npy header: field %q: want a string, got %v", "descr", d["descr"])
	}
	if h.FortranOrder, ok = d["fortran_order"].(bool); !ok {
		return h, fmt.Errorf("npy header: field %q: want True or False, got %v", "fortran_order", d["fortran_order"])
	}
	if h.Shape, ok = d["shape"].([]int); !ok {
		return h, fmt.Errorf("npy header: field %q: want a tuple of ints, got %v", "shape", d["shape"])
	}
	return h, nil
}

// parseHeaderDict parses the Python dict literal of a .npy header: string
// keys; values that are strings, True/False, or tuples of non-negative ints
// (a trailing "L", as Python 2 wrote longs, is accepted).
func parseHeaderDict(b []byte) (map[string]any, error) {
	p := &litParser{s: string(bytes.TrimRight(b, " \t\r\n\x00"))}
	p.space()
	if !p.eat('{') {
		return nil, p.errorf("want '{'")
	}
	out := map[string]any{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if !p.eat(':') {
			return nil, p.errorf("want ':' after key %q", key)
		}
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if _, dup := out[key]; dup {
			return nil, p.errorf("duplicate key %q", key)
		}
		out[key] = v
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return nil, p.errorf("want ',' or '}'")
		}
		break
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errorf("trailing bytes after the dict")
	}
	return out, nil
}

type litParser struct {
	s string
	i int
}

func (p *litParser) errorf(format string, a ...any) error {
	return fmt.Errorf("dict %q: offset %d: %s", p.s, p.i, fmt.Sprintf(format, a...))
}

func (p *litParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *litParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *litParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.errorf("want a quoted string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *litParser) value() (any, error) {
	switch {
	case p.i >= len(p.s):
		return nil, p.errorf("want a value")
	case p.s[p.i] == '\'' || p.s[p.i] == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	case p.s[p.i] == '(':
		p.i++
		shape := []int{}
		for {
			p.space()
			if p.eat(')') {
				return shape, nil
			}
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			shape = append(shape, n)
			p.space()
			if p.eat(',') {
				continue
			}
			if !p.eat(')') {
				return nil, p.errorf("want ',' or ')' in tuple")
			}
			return shape, nil
		}
	default:
		return nil, p.errorf("unsupported value")
	}
}

func (p *litParser) int() (int, error) {
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	if j == p.i {
		return 0, p.errorf("want a non-negative integer")
	}
	n, err := strconv.Atoi(p.s[p.i:j])
	if err != nil {
		return 0, p.errorf("integer %q: %v", p.s[p.i:j], err)
	}
	p.i = j
	if p.i < len(p.s) && p.s[p.i] == 'L' {
		p.i++
	}
	return n, nil
}

// checkF4Matrix checks that h describes a C-order little-endian float32
// [N, D] array and returns N and D.
func checkF4Matrix(h Header) (n, d int, err error) {
	if h.Descr != "<f4" {
		return 0, 0, fmt.Errorf("dtype %q: want '<f4' (little-endian float32; convert with x.astype('<f4'))", h.Descr)
	}
	if h.FortranOrder {
		return 0, 0, errors.New("fortran_order is True: want a C-order array (save np.ascontiguousarray(x))")
	}
	if len(h.Shape) != 2 {
		return 0, 0, fmt.Errorf("shape %v: want 2 dimensions [N, D]", h.Shape)
	}
	n, d = h.Shape[0], h.Shape[1]
	if d > 0 && n > math.MaxInt/4/d {
		return 0, 0, fmt.Errorf("shape %v: too large", h.Shape)
	}
	return n, d, nil
}

// readHeaderFile opens path and returns its validated header, the file
// positioned at the data, and N, D.
func readHeaderFile(path string) (f *os.File, br *bufio.Reader, h Header, n, d int, err error) {
	f, err = os.Open(path)
	if err != nil {
		return nil, nil, h, 0, 0, fmt.Errorf("read npy %s: %w", path, err)
	}
	br = bufio.NewReaderSize(f, 1<<20)
	if h, err = ReadHeader(br); err != nil {
		f.Close()
		return nil, nil, h, 0, 0, fmt.Errorf("read npy %s: %w", path, err)
	}
	if n, d, err = checkF4Matrix(h); err != nil {
		f.Close()
		return nil, nil, h, 0, 0, fmt.Errorf("read npy %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, h, 0, 0, fmt.Errorf("read npy %s: %w", path, err)
	}
	if want := h.DataOffset + int64(n)*int64(d)*4; st.Size() != want {
		f.Close()
		return nil, nil, h, 0, 0, fmt.Errorf("read npy %s: file is %d bytes, want %d for header %d + float32 %v",
			path, st.Size(), want, h.DataOffset, h.Shape)
	}
	return f, br, h, n, d, nil
}

// ReadShape reads only the header of the .npy file at path and returns N
// and D, with Read's checks (float32 '<f4', C order, 2-D, file size).
func ReadShape(path string) (n, d int, err error) {
	f, _, _, n, d, err := readHeaderFile(path)
	if err != nil {
		return 0, 0, err
	}
	f.Close()
	return n, d, nil
}

// decodeF4 fills dst from little-endian float32 bytes read from r.
func decodeF4(r io.Reader, dst []float32) error {
	buf := make([]byte, 1<<16)
	for len(dst) > 0 {
		m := min(len(dst), len(buf)/4)
		if _, err := io.ReadFull(r, buf[:m*4]); err != nil {
			return err
		}
		for i := range m {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i*4:]))
		}
		dst = dst[m:]
	}
	return nil
}

// Read reads a .npy file holding a float32 matrix [N, D] (descr '<f4',
// C order, format 1.0/2.0/3.0) and returns it row-major: x[i*d+j] = A[i, j],
// len(x) = n*d. Errors name the file: other dtypes (float16/float64, '>f4'),
// fortran_order arrays, shapes that are not 2-D, and a file size that does
// not match the header.
func Read(path string) (x []float32, n, d int, err error) {
	f, br, _, n, d, err := readHeaderFile(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	x = make([]float32, n*d)
	if err := decodeF4(br, x); err != nil {
		return nil, 0, 0, fmt.Errorf("read npy %s: data: %w", path, err)
	}
	return x, n, d, nil
}

// EncodeHeader returns the .npy format 1.0 header NumPy writes for a
// C-order '<f4' array of the given shape: magic, version, uint16 length and
// the dict "{'descr': '<f4', 'fortran_order': False, 'shape': (n, d), }",
// the spare spaces NumPy >= 1.23 adds so axis 0 can grow in place, then
// spaces and a final '\n' up to a multiple of 64 bytes
// (numpy.lib.format._write_array_header and _wrap_header).
func EncodeHeader(shape ...int) []byte {
	var sb strings.Builder
	sb.WriteString("{'descr': '<f4', 'fortran_order': False, 'shape': (")
	for i, s := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(s))
	}
	if len(shape) == 1 {
		sb.WriteByte(',')
	}
	sb.WriteString("), }")
	if len(shape) > 0 {
		// Spare room to grow axis 0 in place (numpy GROWTH_AXIS_MAX_DIGITS = 21).
		sb.WriteString(strings.Repeat(" ", max(0, 21-len(strconv.Itoa(shape[0])))))
	}
	dict := sb.String()
	hlen := len(dict) + 1 // + '\n'
	pad := 64 - (10+hlen)%64
	out := make([]byte, 0, 10+hlen+pad)
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(hlen+pad))
	out = append(out, dict...)
	out = append(out, bytes.Repeat([]byte{' '}, pad)...)
	return append(out, '\n')
}

// Write writes x, row-major [n, d], as a .npy format 1.0 file with descr
// '<f4', readable by numpy.load and byte-identical to what NumPy >= 1.23
// writes for np.save(path, x.reshape(n, d).astype('<f4')). Errors: len(x)
// != n*d, negative sizes, and I/O errors naming the file.
func Write(path string, x []float32, n, d int) error {
	if n < 0 || d < 0 || len(x) != n*d {
		return fmt.Errorf("write npy %s: len(x) = %d does not match shape [%d, %d]", path, len(x), n, d)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write npy %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(EncodeHeader(n, d))
	var b [4]byte
	for _, v := range x {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		w.Write(b[:])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write npy %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write npy %s: %w", path, err)
	}
	return nil
}
