//! The fuzzer's working copy of a reference store: the edits applied to
//! its files and undone after each case.

use super::*;

// ---------------------------------------------------------------- the store

/// A working copy of one reference store, with what the edits pick from.
pub(crate) struct Work {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
    /// Every file of the pristine store, relative path -> bytes.
    pub(crate) base: BTreeMap<PathBuf, Vec<u8>>,
    /// zarr.json files (relative).
    pub(crate) json: Vec<PathBuf>,
    /// Array zarr.json files (relative).
    pub(crate) arrays: Vec<PathBuf>,
    /// Chunk files (relative), sharded or not.
    pub(crate) chunks: Vec<PathBuf>,
    /// Shard files: (relative path, inner chunks per shard, crc32c on the index).
    pub(crate) shards: Vec<(PathBuf, usize, bool)>,
    /// Unsharded zstd chunk files and their element size.
    pub(crate) zstd_chunks: Vec<(PathBuf, usize)>,
}

pub(crate) fn dtype_size(name: &str) -> usize {
    match name {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        _ => 8,
    }
}

impl Work {
    pub(crate) fn new(name: &str) -> Work {
        let dir = common::tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        common::copy_dir(&common::assets().join(format!("{name}.zarr")), &path);
        let base = common::snapshot(&path);
        let mut w = Work {
            _dir: dir,
            path,
            base,
            json: vec![],
            arrays: vec![],
            chunks: vec![],
            shards: vec![],
            zstd_chunks: vec![],
        };
        for (rel, bytes) in &w.base {
            if rel.file_name().is_some_and(|n| n == "zarr.json") {
                w.json.push(rel.clone());
                let v: Value = serde_json::from_slice(bytes).unwrap();
                if v["node_type"] == "array" {
                    w.arrays.push(rel.clone());
                }
            }
        }
        for rel in w.base.keys() {
            let Some(array) = rel.ancestors().find(|a| a.file_name().is_some_and(|n| n == "c")).and_then(Path::parent)
            else {
                continue;
            };
            w.chunks.push(rel.clone());
            let meta: Value = serde_json::from_slice(&w.base[&array.join("zarr.json")]).unwrap();
            let size = dtype_size(meta["data_type"].as_str().unwrap());
            let codecs = meta["codecs"].as_array().unwrap();
            if codecs[0]["name"] == "sharding_indexed" {
                let outer = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap();
                let inner = codecs[0]["configuration"]["chunk_shape"][0].as_u64().unwrap();
                let crc = codecs[0]["configuration"]["index_codecs"].as_array().unwrap().len() == 2;
                w.shards.push((rel.clone(), (outer / inner) as usize, crc));
            } else if codecs.len() == 2 && codecs[1]["name"] == "zstd" {
                w.zstd_chunks.push((rel.clone(), size));
            }
        }
        assert!(!w.arrays.is_empty() && !w.chunks.is_empty());
        w
    }

    pub(crate) fn abs(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    pub(crate) fn read_json(&self, rel: &Path) -> Value {
        serde_json::from_slice(&std::fs::read(self.abs(rel)).unwrap()).unwrap_or(Value::Null)
    }

    pub(crate) fn write_json(&self, rel: &Path, v: &Value) {
        std::fs::write(self.abs(rel), serde_json::to_vec_pretty(v).unwrap()).unwrap();
    }

    /// Puts back every file an edit may have touched (and removes new ones).
    pub(crate) fn restore(&self, touched: &[PathBuf]) {
        for rel in touched {
            let p = self.abs(rel);
            match self.base.get(rel) {
                Some(b) => std::fs::write(&p, b).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }

    /// Applies `e`, recording the files it writes in `touched` (before
    /// writing them, so a failed edit is restored too).
    pub(crate) fn apply(&self, e: &Edit, touched: &mut Vec<PathBuf>) {
        match e {
            Edit::Number { file, leaf, value } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let leaves = paths(&v, true);
                if leaves.is_empty() {
                    return;
                }
                let at = leaf.get(&leaves);
                let node = get_mut(&mut v, at);
                *node = value.apply(node);
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Replace { file, node, with } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let nodes = paths(&v, false);
                let at = node.get(&nodes);
                *get_mut(&mut v, at) = with.get(&pool()).clone();
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Remove { file, node } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let nodes: Vec<Vec<Seg>> =
                    paths(&v, false).into_iter().filter(|p| matches!(p.last(), Some(Seg::Key(_)))).collect();
                if nodes.is_empty() {
                    return;
                }
                let at = node.get(&nodes);
                if let (Some(Seg::Key(k)), Some(parent)) =
                    (at.last(), get_mut(&mut v, &at[..at.len() - 1]).as_object_mut())
                {
                    parent.remove(k);
                }
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Dim { file, dims, dim, value } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                if let Some(arr) = v.pointer_mut(dims.pointer()).and_then(Value::as_array_mut)
                    && !arr.is_empty()
                {
                    let k = dim.index(arr.len());
                    arr[k] = value.apply(&arr[k]);
                    touched.push(rel.clone());
                    self.write_json(&rel, &v);
                }
            }
            Edit::Rank { file, dims, add } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                if let Some(arr) = v.pointer_mut(dims.pointer()).and_then(Value::as_array_mut) {
                    if *add {
                        arr.push(json!(3));
                    } else {
                        arr.pop();
                    }
                    touched.push(rel.clone());
                    self.write_json(&rel, &v);
                }
            }
            Edit::DataType { file, name } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                set(&mut v, &["data_type"], json!(name.get(DTYPES)));
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::FillValue { file, with } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                let mut choices = pool();
                choices.extend([
                    json!(1),
                    json!(-1),
                    json!(1e300),
                    json!("Infinity"),
                    json!("0x7fc00000"),
                    json!(false),
                ]);
                set(&mut v, &["fill_value"], with.get(&choices).clone());
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Codecs { file, chain } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                set(&mut v, &["codecs"], chain.get(&chains()).clone());
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::NumSamples { value, pointers } => {
                let root = PathBuf::from("zarr.json");
                let mut v = self.read_json(&root);
                let n = value.apply(v.pointer("/attributes/num_samples").unwrap_or(&Value::Null));
                set(&mut v, &["attributes", "num_samples"], n.clone());
                touched.push(root.clone());
                self.write_json(&root, &v);
                if *pointers && let Some(n) = n.as_u64() {
                    for (rel, len) in [
                        ("meta/atoms_ptr", n.saturating_add(1)),
                        ("meta/edges_ptr", n.saturating_add(1)),
                        ("meta/samples_mask", n),
                    ] {
                        let rel = Path::new(rel).join("zarr.json");
                        let mut a = self.read_json(&rel);
                        set(&mut a, &["shape"], json!([len]));
                        touched.push(rel.clone());
                        self.write_json(&rel, &a);
                    }
                }
            }
            Edit::Fields { field, change } => {
                let root = PathBuf::from("zarr.json");
                let mut v = self.read_json(&root);
                let Some(core) = v.pointer_mut("/attributes/fields/core").and_then(Value::as_object_mut) else {
                    return;
                };
                let names: Vec<String> = core.keys().cloned().collect();
                if names.is_empty() {
                    return;
                }
                let name = field.get(&names).clone();
                match change {
                    0 => {
                        core.remove(&name);
                    }
                    1 => {
                        let level = match core[&name].as_str() {
                            Some("atom") => "edge",
                            Some("edge") => "system",
                            _ => "atom",
                        };
                        core.insert(name, json!(level));
                    }
                    2 => {
                        core.insert("no_such_field".into(), json!("atom"));
                    }
                    3 => {
                        // A name that walks out of the store.
                        core.insert(format!("../../{name}"), json!("atom"));
                    }
                    _ => {
                        core.insert(name, json!(42));
                    }
                }
                touched.push(root.clone());
                self.write_json(&root, &v);
            }
            Edit::Chunk { file, how } => {
                let rel = file.get(&self.chunks).clone();
                let old = self.base[&rel].clone();
                let new = match how {
                    Bytes::Flip { at, bit } if !old.is_empty() => {
                        let mut b = old;
                        let k = at.index(b.len());
                        b[k] ^= 1 << bit;
                        b
                    }
                    Bytes::Header { at, value } if (*at as usize) < old.len() => {
                        let mut b = old;
                        b[*at as usize] = *value;
                        b
                    }
                    Bytes::Set { at, value } if !old.is_empty() => {
                        let mut b = old;
                        let k = at.index(b.len());
                        b[k] = *value;
                        b
                    }
                    Bytes::Truncate { at } => old[..at.index(old.len().max(1))].to_vec(),
                    Bytes::Extend { bytes } => [old, bytes.clone()].concat(),
                    Bytes::Empty => vec![],
                    Bytes::Zero => vec![0; old.len()],
                    Bytes::Random { bytes } => bytes.clone(),
                    _ => return,
                };
                touched.push(rel.clone());
                std::fs::write(self.abs(&rel), new).unwrap();
            }
            Edit::ShardIndex { file, entry, offset, size, fix_crc } => {
                if self.shards.is_empty() {
                    return;
                }
                let (rel, per_shard, crc) = file.get(&self.shards).clone();
                let mut b = self.base[&rel].clone();
                let index_len = per_shard * 16 + if crc { 4 } else { 0 };
                if b.len() < index_len {
                    return;
                }
                let start = b.len() - index_len;
                let k = entry.index(per_shard);
                let at = start + 16 * k;
                let word = |b: &[u8], i: usize| i64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                let o = offset.as_i64(word(&b, at));
                let s = size.as_i64(word(&b, at + 8));
                b[at..at + 8].copy_from_slice(&o.to_le_bytes());
                b[at + 8..at + 16].copy_from_slice(&s.to_le_bytes());
                if crc && *fix_crc {
                    let sum = crc32c::crc32c(&b[start..start + per_shard * 16]);
                    let end = b.len();
                    b[end - 4..].copy_from_slice(&sum.to_le_bytes());
                }
                touched.push(rel.clone());
                std::fs::write(self.abs(&rel), b).unwrap();
            }
            Edit::Value { file, elem, value } => {
                if self.zstd_chunks.is_empty() {
                    return;
                }
                let (rel, size) = file.get(&self.zstd_chunks).clone();
                self.set_element(&rel, size, |n| elem.index(n), value, touched);
            }
            Edit::Pointer { edges, at, value } => {
                let array = if *edges { "meta/edges_ptr" } else { "meta/atoms_ptr" };
                // The chunk holding the chosen pointer: the last chunk file
                // for the last pointer, any for another.
                let files: Vec<&PathBuf> = self.chunks.iter().filter(|c| c.starts_with(array)).collect();
                if files.is_empty() {
                    return;
                }
                match at {
                    Some(i) => {
                        let rel = i.get(&files).to_path_buf();
                        self.set_element(&rel, 8, |n| i.index(n), value, touched);
                    }
                    None => {
                        // The last pointer (the total), not the chunk's padding.
                        let meta: Value =
                            serde_json::from_slice(&self.base[&Path::new(array).join("zarr.json")]).unwrap();
                        let last = meta["shape"][0].as_u64().unwrap_or(1).saturating_sub(1);
                        let rows = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap_or(1).max(1);
                        let rel = Path::new(array).join("c").join((last / rows).to_string());
                        if self.base.contains_key(&rel) {
                            self.set_element(&rel, 8, |_| (last % rows) as usize, value, touched);
                        }
                    }
                }
            }
        }
    }

    /// Sets one element (`pick(elements)`) of an unsharded `bytes` + `zstd`
    /// chunk, re-encoding it validly.
    pub(crate) fn set_element(
        &self,
        rel: &PathBuf,
        size: usize,
        pick: impl FnOnce(usize) -> usize,
        value: &Num,
        touched: &mut Vec<PathBuf>,
    ) {
        let Ok(mut raw) = zstd::decode_all(&self.base[rel][..]) else { return };
        let n = raw.len() / size;
        if n == 0 {
            return;
        }
        let k = pick(n).min(n - 1) * size;
        let mut old = [0u8; 8];
        old[..size].copy_from_slice(&raw[k..k + size]);
        let new = value.as_i64(i64::from_le_bytes(old)).to_le_bytes();
        raw[k..k + size].copy_from_slice(&new[..size]);
        touched.push(rel.clone());
        std::fs::write(self.abs(rel), zstd::encode_all(&raw[..], 1).unwrap()).unwrap();
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Seg {
    Key(String),
    Idx(usize),
}

/// JSON paths of every node (or only of number leaves), pre-order.
pub(crate) fn paths(v: &Value, numbers_only: bool) -> Vec<Vec<Seg>> {
    fn walk(v: &Value, at: &mut Vec<Seg>, numbers_only: bool, out: &mut Vec<Vec<Seg>>) {
        if !numbers_only || v.is_number() {
            out.push(at.clone());
        }
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    at.push(Seg::Key(k.clone()));
                    walk(c, at, numbers_only, out);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    at.push(Seg::Idx(i));
                    walk(c, at, numbers_only, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = vec![];
    walk(v, &mut vec![], numbers_only, &mut out);
    out
}

/// Sets `v[path]` where every step is an object (else leaves `v` alone:
/// an earlier edit may have made it something else).
pub(crate) fn set(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = v;
    for k in parents {
        match at.get_mut(*k) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(m) = at.as_object_mut() {
        m.insert((*last).to_string(), value);
    }
}

pub(crate) fn get_mut<'a>(mut v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    for s in path {
        v = match s {
            Seg::Key(k) => &mut v[k.as_str()],
            Seg::Idx(i) => &mut v[*i],
        };
    }
    v
}
