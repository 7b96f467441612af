"""A safetensors file as numpy arrays (F32, I64), without the safetensors package; the PyTorch peer scripts' reader."""
import json, struct


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        dt = {"F32": "<f4", "I64": "<i8"}[v["dtype"]]
        out[k] = np.frombuffer(data[b:e], dtype=dt).reshape(v["shape"]).copy()
    return out
