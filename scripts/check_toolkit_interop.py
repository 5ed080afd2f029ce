#!/usr/bin/env python3
"""Manual check: stores atomzarr writes, checksummed, read by the reference toolkit.

NOT part of CI, and CI must never install the toolkit. Run by hand after a
change to what the writer puts in a store (codecs, checksums, layout):

    python3 -m venv /tmp/nva && /tmp/nva/bin/pip install nvalchemi-toolkit==0.3.0
    cargo build --release
    /tmp/nva/bin/python scripts/check_toolkit_interop.py [--bin target/release/atomzarr] [-n 300]

What it does, for each layout (codec zstd / none / blosc-lz4, unsharded and
sharded, checksums on; and zstd with checksums off):

1. writes a store with `atomzarr roundtrip --output-dir --write-batch 7`
   (a write of 7 samples, then appends of 7: the writer rewrites metadata
   and tail chunks, extending them with uncompressed zstd blocks; the
   store holds the writer's lock file);
2. checks that every array's codec chain (the inner chain when sharded) ends
   in `{"name": "crc32c"}` exactly when checksums are on;
3. reads every sample with the toolkit's `AtomicDataZarrReader` (zarr-python
   3) and compares each, field by field (dtype, shape, every value exactly),
   with `atomzarr dump` of the same store;
4. flips one byte inside one (inner) chunk of `core/positions` and checks
   that both the toolkit and atomzarr refuse to read it (checksums on), and
   says what each does without checksums.

Then the alternative it was chosen against, zstd's own `checksum: true`: the
toolkit's writer writes a store with `ZstdCodec(level=3, checksum=True)`; it
is read by both sides and compared, then a byte of one zstd payload is
flipped and each side's reaction is printed.

With --labels it checks instead the additions of docs/LABELS.md: it
imports assets/import/formats/partial.extxyz (stress and magnetic moments on
some frames only, string labels) and mptrj.json with `atomzarr import`, then

1. reads every string label with zarr-python 3 (`strings/<name>`, a Zarr v3
   `string` array) and compares it with `atomzarr dump`;
2. reads every field with zarr-python and with the toolkit's
   `AtomicDataZarrReader` and compares them with the dump, NaN (an absent
   label) equal to NaN; the toolkit sees no string labels and must not fail
   on them.

Exit status 0 when every comparison matched and every flipped byte was
refused where a checksum covers it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def dump(bin_: Path, store: Path) -> dict:
    out = subprocess.run([str(bin_), "dump", str(store)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def toolkit_samples(store: Path) -> list[dict]:
    from nvalchemi.data.datapipes.backends.zarr import AtomicDataZarrReader

    reader = AtomicDataZarrReader(str(store))
    samples = [d for d, _ in reader.read_many(list(range(len(reader))))]
    # One sample at a time too: the toolkit's single-sample path.
    singles = [reader[i][0] for i in range(0, len(reader), max(1, len(reader) // 7))]
    reader.close()
    return samples, singles


def as_dump_field(t) -> dict:
    import torch

    dtype = str(t.dtype).removeprefix("torch.")
    vals = t.double() if t.is_floating_point() else t
    return {"dtype": dtype, "shape": list(t.shape), "data": vals.flatten().tolist()}


def compare(ours: dict, theirs: list[dict], what: str) -> None:
    check(ours["num_samples"] == len(theirs), f"{what}: {len(theirs)} samples read by the toolkit, dump has {ours['num_samples']}")
    bad = []
    for i, (a, b) in enumerate(zip(ours["samples"], theirs)):
        tb = {k: as_dump_field(v) for k, v in b.items()}
        if sorted(a) != sorted(tb):
            bad.append(f"sample {i}: fields {sorted(a)} vs {sorted(tb)}")
            continue
        for k in a:
            if a[k] != tb[k]:
                bad.append(f"sample {i} field {k}: dump {str(a[k])[:120]} toolkit {str(tb[k])[:120]}")
    check(not bad, f"{what}: every sample equal, field by field" + ("" if not bad else f" ({len(bad)} differ, first: {bad[0]})"))


def inner_codecs(zarr_json: dict) -> list:
    codecs = zarr_json["codecs"]
    if len(codecs) == 1 and isinstance(codecs[0], dict) and codecs[0].get("name") == "sharding_indexed":
        return codecs[0]["configuration"]["codecs"]
    return codecs


def check_codecs(store: Path, checksum: bool, what: str) -> None:
    bad = []
    for zj in sorted(store.glob("*/*/zarr.json")):
        meta = json.loads(zj.read_text())
        if meta.get("node_type") != "array":
            continue
        chain = inner_codecs(meta)
        has = chain[-1] == {"name": "crc32c"}
        if has != checksum or any(not isinstance(c, dict) for c in meta["codecs"]):
            bad.append(f"{zj.parent.relative_to(store)}: {json.dumps(meta['codecs'])}")
    check(not bad, f"{what}: every array's chain {'ends' if checksum else 'does not end'} in crc32c, codecs as objects" + (f" ({bad[0]})" if bad else ""))


def flip_one_byte(array_dir: Path) -> str:
    """Flips a byte in the middle of the first (inner) chunk of `array_dir`."""
    meta = json.loads((array_dir / "zarr.json").read_text())
    chunk = array_dir / "c" / "0" / "0"
    raw = bytearray(chunk.read_bytes())
    codecs = meta["codecs"]
    if codecs[0].get("name") == "sharding_indexed":
        conf = codecs[0]["configuration"]
        per_shard = meta["chunk_grid"]["configuration"]["chunk_shape"][0] // conf["chunk_shape"][0]
        index_len = per_shard * 16 + (4 if len(conf["index_codecs"]) == 2 else 0)
        index = raw[-index_len:] if conf.get("index_location", "end") == "end" else raw[:index_len]
        offset = int.from_bytes(index[0:8], "little")
        size = int.from_bytes(index[8:16], "little")
        at = offset + size // 2
    else:
        at = len(raw) // 2
    raw[at] ^= 0x01
    chunk.write_bytes(bytes(raw))
    return f"{chunk.relative_to(array_dir.parent.parent)} byte {at}"


def corrupt_and_read(bin_: Path, store: Path, work: Path, expect_refusal: bool, what: str) -> None:
    bad = work / (store.name + ".flipped")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(store, bad)
    where = flip_one_byte(bad / "core" / "positions")
    try:
        toolkit_samples(bad)
        tk = None
    except Exception as e:  # the toolkit raises whatever zarr-python raises
        tk = f"{type(e).__name__}: {e}"
    try:
        ours_out = dump(bin_, bad)
        ours = None
        clean = dump(bin_, store)
        silently_wrong = ours_out != clean
    except RuntimeError as e:
        ours, silently_wrong = str(e), False
    print(f"  flipped {where}")
    print(f"    toolkit:  {tk or 'read it without an error'}")
    print(f"    atomzarr: {ours or ('read it without an error' + (', and the values differ' if silently_wrong else ''))}")
    if expect_refusal:
        check(tk is not None and ours is not None and "checksum" in ours, f"{what}: both readers refuse the flipped byte")


def write_ours(bin_: Path, out: Path, n: int, codec: str, sharded: bool, checksum: bool) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    args = [str(bin_), "roundtrip", "-n", str(n), "--codec", codec, "--level", "3", "--output-dir", str(out),
            "--read-mode", "raw", "--json", "--chunk-size", "500", "--edge-chunk-size", "1000", "--write-batch", "7"]
    if sharded:
        args += ["--shard-size", "2000", "--edge-shard-size", "4000"]
    if not checksum:
        args.append("--no-checksum")
    res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    return out / f"bench_{n}.zarr"


def toolkit_zstd_checksum(bin_: Path, src: dict, work: Path) -> None:
    """The alternative: zstd's own checksum, written by the toolkit's writer."""
    import torch
    from zarr.codecs import ZstdCodec
    from nvalchemi.data import AtomicData
    from nvalchemi.data.datapipes.backends.zarr import AtomicDataZarrWriter, ZarrArrayConfig, ZarrWriteConfig

    tdt = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool}
    samples = []
    for s in src["samples"]:
        kw = {k: torch.tensor(v["data"], dtype=tdt[v["dtype"]]).reshape(v["shape"]) for k, v in s.items()}
        samples.append(AtomicData(**kw))
    zc = ZarrArrayConfig(compressors=(ZstdCodec(level=3, checksum=True),), chunk_size=500)
    store = work / "toolkit_zstd_checksum.zarr"
    shutil.rmtree(store, ignore_errors=True)
    cfg = ZarrWriteConfig(meta=zc, core=zc)
    half = len(samples) // 2
    w = AtomicDataZarrWriter(str(store), config=cfg)
    w.write(samples[:half])
    w.append(samples[half:])
    meta = json.loads((store / "core" / "positions" / "zarr.json").read_text())
    print(f"  toolkit wrote core/positions codecs {json.dumps(meta['codecs'])}")
    ours = dump(bin_, store)
    theirs, singles = toolkit_samples(store)
    compare(ours, theirs, "toolkit store, zstd checksum: true, atomzarr dump vs toolkit read")
    # The first half equals what was written (the toolkit's own append shifts
    # the appended half's neighbor lists, see STORE_FORMAT.md).
    diff = [(i, k) for i in range(half) for k in src["samples"][i] if ours["samples"][i].get(k) != src["samples"][i][k]]
    check(not diff, "toolkit store, zstd checksum: true: first half equals the source samples" + (f" (first difference: sample, field {diff[0]})" if diff else ""))
    corrupt_and_read(bin_, store, work, True, "toolkit store, zstd checksum: true")


def same(a, b) -> bool:
    """Equal, NaN equal to NaN (absent labels)."""
    import math

    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def check_labels(bin_: Path, work: Path) -> None:
    import numpy as np
    import zarr

    root = Path(__file__).resolve().parent.parent / "assets" / "import" / "formats"
    for name in ("partial.extxyz", "mptrj.json"):
        store = work / (name + ".zarr")
        shutil.rmtree(store, ignore_errors=True)
        res = subprocess.run([str(bin_), "import", str(root / name), str(store)], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
        ours = dump(bin_, store)
        g = zarr.open_group(str(store), mode="r")
        labels = dict(g.attrs.get("strings", {}))
        check(bool(labels), f"{name}: string labels listed in the root attributes: {sorted(labels)}")
        for label in labels:
            arr = g["strings"][label]
            got = [str(x) for x in arr[:]]
            want = [v for s in ours["samples"] for v in s[label]["data"]]
            check(got == want, f"{name}: zarr-python reads strings/{label} ({arr.dtype}) as the dump's values")
        fields = dict(g.attrs["fields"]["core"]) | dict(g.attrs["fields"]["custom"])
        bad = []
        for field, level in fields.items():
            group = "core" if field in g.attrs["fields"]["core"] else "custom"
            data = g[group][field][:]
            ptr = g["meta"]["atoms_ptr"][:]
            for i, s in enumerate(ours["samples"]):
                rows = data[ptr[i]:ptr[i + 1]] if level == "atom" else data[i:i + 1]
                vals = rows.astype(np.float64).ravel().tolist() if rows.dtype.kind == "f" else rows.ravel().tolist()
                if not same(vals, s[field]["data"]):
                    bad.append(f"sample {i} {field}")
        check(not bad, f"{name}: zarr-python reads every field as the dump, NaN where absent" + (f" (first: {bad[0]})" if bad else ""))
        try:
            theirs, _ = toolkit_samples(store)
        except Exception as e:  # whatever the toolkit raises
            check(False, f"{name}: the toolkit opens the store ({type(e).__name__}: {e})")
            continue
        bad = []
        for i, (a, b) in enumerate(zip(ours["samples"], theirs)):
            tb = {k: as_dump_field(v) for k, v in b.items()}
            numeric = {k: v for k, v in a.items() if v["dtype"] != "string"}
            if sorted(numeric) != sorted(tb):
                bad.append(f"sample {i}: fields {sorted(numeric)} vs {sorted(tb)}")
                continue
            bad += [f"sample {i} {k}" for k in numeric if not same(numeric[k], tb[k])]
        check(len(theirs) == ours["num_samples"] and not bad,
              f"{name}: the toolkit reads every sample as the dump (string labels not seen by it)" + (f" (first: {bad[0]})" if bad else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=Path, default=Path("target/release/atomzarr"))
    ap.add_argument("-n", type=int, default=300, help="samples per store")
    ap.add_argument("--keep", type=Path, help="write the stores here (kept) instead of a temp dir")
    ap.add_argument("--labels", action="store_true", help="check string and absent labels (docs/LABELS.md) instead")
    a = ap.parse_args()
    import zarr
    import nvalchemi

    print(f"zarr-python {zarr.__version__}, nvalchemi-toolkit {getattr(nvalchemi, '__version__', '0.3.x')}")
    tmp = tempfile.TemporaryDirectory(prefix="atomzarr_interop_")
    work = a.keep or Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    if a.labels:
        check_labels(a.bin, work)
        print(f"{len(FAILURES)} failure(s)")
        return 1 if FAILURES else 0
    layouts = [(c, sh, True) for c in ("zstd", "none", "lz4") for sh in (False, True)]
    layouts.append(("zstd", True, False))
    zstd_dump = None
    for codec, sharded, checksum in layouts:
        what = f"{codec}, {'sharded' if sharded else 'unsharded'}, checksum {'on' if checksum else 'off'}"
        print(what)
        store = write_ours(a.bin, work / what.replace(", ", "_").replace(" ", "-"), a.n, codec, sharded, checksum)
        check_codecs(store, checksum, what)
        ours = dump(a.bin, store)
        theirs, singles = toolkit_samples(store)
        compare(ours, theirs, what)
        step = max(1, len(theirs) // 7)
        check([ours["samples"][i] for i in range(0, len(theirs), step)] == [{k: as_dump_field(v) for k, v in s.items()} for s in singles],
              f"{what}: toolkit single-sample reads equal too")
        corrupt_and_read(a.bin, store, work, checksum, what)
        if codec == "zstd" and checksum and not sharded:
            zstd_dump = ours
    print("zstd checksum: true (the toolkit's own writer)")
    toolkit_zstd_checksum(a.bin, zstd_dump, work)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
