//! The on-disk contract (STORE_FORMAT.md): group and array names, the root
//! attributes, and the paths interrupted writes leave behind. (The codec
//! chain of each array is built from the write configuration in
//! `store::arrays`.)
//!
//! Everything that knows a path inside a store lives here, so the writer and
//! the reader cannot disagree about the layout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::data::{DType, Level};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::bytes::ByteSource;

/// `meta/atoms_ptr`
pub const ATOMS_PTR: &str = "meta/atoms_ptr";
/// `meta/edges_ptr`
pub const EDGES_PTR: &str = "meta/edges_ptr";
/// `meta/samples_mask`
pub const SAMPLES_MASK: &str = "meta/samples_mask";
/// `meta/atoms_mask`
pub const ATOMS_MASK: &str = "meta/atoms_mask";
/// `meta/edges_mask`
pub const EDGES_MASK: &str = "meta/edges_mask";

/// Every array of `meta/` with its dtype: the one list that creating,
/// inspecting, validating and defragmenting a store iterate. Pointers are
/// int64 with `num_samples + 1` entries; masks are bool, one per row of their
/// axis.
pub const META_ARRAYS: [(&str, DType); 5] = [
    (ATOMS_PTR, DType::Int64),
    (EDGES_PTR, DType::Int64),
    (SAMPLES_MASK, DType::Bool),
    (ATOMS_MASK, DType::Bool),
    (EDGES_MASK, DType::Bool),
];

/// The checks every reader of `meta/*_ptr` applies to the `n + 1` values
/// it read (the writer before an append, the reader when it opens): exactly
/// `n + 1` of them, starting at 0, never decreasing. Appends, deletes and
/// reads all turn these into row ranges, so a bad one is refused here, once.
///
/// # Errors
/// [`Error::Inconsistent`] naming `store` and `rel` when `v` does not hold
/// `n + 1` values, does not start at 0 or decreases.
pub(crate) fn check_pointers(store: &Location, rel: &str, v: &[i64], n: usize) -> Result<()> {
    if v.len() != n + 1 {
        return Err(Error::inconsistent(
            store,
            rel,
            format!("{} pointers read, expected num_samples {n} + 1", v.len()),
        ));
    }
    if v.first() != Some(&0) {
        return Err(Error::inconsistent(store, rel, format!("first pointer is {:?}, expected 0", v.first())));
    }
    if let Some(i) = v.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::inconsistent(
            store,
            rel,
            format!("pointers decrease at sample {i}: {} then {}", v[i], v[i + 1]),
        ));
    }
    Ok(())
}

/// A `meta/` array's name inside its group (`meta/atoms_ptr` -> `atoms_ptr`),
/// the key its write configuration goes by.
pub(crate) fn meta_name(rel: &str) -> &str {
    rel.strip_prefix("meta/").unwrap_or(rel)
}

/// Field names the writer places in `core/` (everything else goes to `custom/`).
/// The reference toolkit's `AtomicData` model fields.
pub const CORE_FIELDS: &[&str] = &[
    "atomic_numbers",
    "positions",
    "atomic_masses",
    "atom_categories",
    "forces",
    "velocities",
    "charges",
    "node_embeddings",
    "neighbor_list",
    "shifts",
    "neighbor_list_shifts",
    "edge_embeddings",
    "energy",
    "stress",
    "virial",
    "dipole",
    "charge",
    "graph_embeddings",
    "cell",
    "pbc",
    "spin",
];

/// The three groups of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreGroup {
    /// `meta/`: pointers and masks.
    Meta,
    /// `core/`: the standard fields.
    Core,
    /// `custom/`: user fields.
    Custom,
}

impl StoreGroup {
    /// The group's path component.
    pub fn name(self) -> &'static str {
        match self {
            StoreGroup::Meta => "meta",
            StoreGroup::Core => "core",
            StoreGroup::Custom => "custom",
        }
    }
}

/// Name table the reference toolkit falls back to when a core field is not in
/// the store's `fields` attribute (STORE_FORMAT.md, "level of a field").
pub fn default_level(name: &str) -> Level {
    match name {
        "shifts" | "neighbor_list_shifts" | "neighbor_list" | "edge_embeddings" => Level::Edge,
        "energy" | "stress" | "virial" | "dipole" | "charge" | "graph_embeddings" | "cell" | "pbc" | "spin" => {
            Level::System
        }
        _ => Level::Atom,
    }
}

/// Checks that `name` can name a field: it becomes a directory under
/// `core/` or `custom/`, so it must be one Zarr v3 node name (not empty, not
/// `.` or `..`, no `/`, not starting with the reserved `__`); backslashes and
/// NUL are refused too (path separators or invalid elsewhere).
///
/// # Errors
/// Why not, as a message naming `name` (callers wrap it in the error of
/// their context).
pub(crate) fn check_field_name(name: &str) -> std::result::Result<(), String> {
    let why = if name.is_empty() {
        "an empty name"
    } else if name == "." || name == ".." {
        "a relative path component"
    } else if name.contains(['/', '\\', '\0']) {
        "a name containing a path separator or NUL"
    } else if name.starts_with("__") {
        "a name starting with the reserved \"__\""
    } else {
        return Ok(());
    };
    Err(format!("field name {name:?} is not a valid Zarr node name ({why})"))
}

/// The group a new field goes to.
pub(crate) fn group_for_new_field(name: &str) -> StoreGroup {
    if CORE_FIELDS.contains(&name) { StoreGroup::Core } else { StoreGroup::Custom }
}

/// A field as the store knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    /// `core` or `custom`.
    pub group: StoreGroup,
    /// Atom, edge or system.
    pub level: Level,
}

/// The root group's attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct RootAttrs {
    /// Physical sample count (committed).
    pub num_samples: usize,
    /// Fields by name, as recorded in `fields` (core and custom).
    pub fields: BTreeMap<String, FieldInfo>,
    /// Any other attributes found (kept on rewrite).
    pub extra: Map<String, Value>,
}

fn read_json(store: &Path, rel: &str) -> Result<Option<Value>> {
    let p = store.join(rel).join("zarr.json");
    match std::fs::read(&p) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::format(store, format!("{rel}/zarr.json is not valid JSON ({e})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&p, e)),
    }
}

/// Reads and checks the root group metadata. `node` errors name what is
/// missing so a user can tell "not a store" from "damaged store".
///
/// # Errors
/// [`Error::NotFound`] when `store` does not exist; [`Error::Format`] when it
/// is not a directory, a `zarr.json` is not valid JSON, or the root, its
/// `meta/` and `core/` groups or its attributes are not those of a store;
/// [`Error::Io`] naming the file on any other read failure.
pub fn read_root(store: &Path) -> Result<RootAttrs> {
    if !store.exists() {
        return Err(Error::NotFound { store: store.into() });
    }
    if !store.is_dir() {
        return Err(Error::format(store, "not a directory (a Zarr v3 store is a directory)"));
    }
    let unlisted = |group: &str| -> Result<Vec<String>> {
        let Ok(entries) = std::fs::read_dir(store.join(group)) else { return Ok(vec![]) };
        Ok(entries
            .flatten()
            .filter(|e| e.path().join("zarr.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    };
    parse_root(&store.into(), |rel| read_json(store, rel), unlisted)
}

/// [`read_root`] over a store's [`ByteSource`] (local or remote). A source
/// that cannot list (plain HTTP) finds unlisted arrays only among the
/// [`CORE_FIELDS`] names.
///
/// # Errors
/// As [`read_root`]; [`Error::Remote`] (kind `NotFound`) when a remote source
/// has no root `zarr.json`, and any error of the byte source's reads
/// ([`Error::Io`] for local files, [`Error::Remote`] for remote ones).
pub fn read_root_from(source: &dyn ByteSource, store: &Location) -> Result<RootAttrs> {
    let json = |rel: &str| -> Result<Option<Value>> {
        let key = if rel == "." { "zarr.json".to_string() } else { format!("{rel}/zarr.json") };
        match source.get(&key)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::format(store, format!("{key} is not valid JSON ({e})"))),
        }
    };
    if source.is_remote() {
        // The root, its groups and every core array's metadata in one round
        // trip (read one at a time below, and again when the arrays open).
        let mut keys = vec!["zarr.json".to_string(), "meta/zarr.json".to_string(), "core/zarr.json".to_string()];
        keys.extend(CORE_FIELDS.iter().map(|n| format!("core/{n}/zarr.json")));
        source.prefetch(&keys);
    }
    // Read once here: a missing root is the store missing, said so.
    let root = json(".")?;
    if root.is_none() {
        if source.is_remote() {
            return Err(Error::Remote {
                url: format!("{}/zarr.json", source.location().trim_end_matches('/')),
                kind: crate::error::RemoteErrorKind::NotFound,
                reason: "no store here (no root zarr.json: check the bucket, the path and the URL)".into(),
            });
        }
        if store.local().is_some_and(|p| !p.exists()) {
            return Err(Error::NotFound { store: store.clone() });
        }
    }
    let root = std::cell::RefCell::new(Some(root));
    let json = |rel: &str| -> Result<Option<Value>> {
        if rel == "."
            && let Some(r) = root.borrow_mut().take()
        {
            return Ok(r);
        }
        json(rel)
    };
    let unlisted = |group: &str| -> Result<Vec<String>> {
        match source.list_sizes(group)? {
            Some(keys) => Ok(keys
                .iter()
                .filter_map(|(k, _)| k.strip_prefix(group)?.strip_prefix('/')?.strip_suffix("/zarr.json"))
                .filter(|name| !name.contains('/'))
                .map(str::to_owned)
                .collect()),
            None if group == "core" => {
                let mut found = Vec::new();
                for name in CORE_FIELDS {
                    if source.size(&format!("core/{name}/zarr.json"))?.is_some() {
                        found.push(name.to_string());
                    }
                }
                Ok(found)
            }
            None => Ok(vec![]),
        }
    };
    parse_root(store, json, unlisted)
}

/// The root attributes, from the store's JSON documents (`read_json(rel)`:
/// `rel/zarr.json`, `.` for the root) and its unlisted arrays
/// (`unlisted(group)`: the array names in `core/` or `custom/`).
fn parse_root(
    store: &Location,
    read_json: impl Fn(&str) -> Result<Option<Value>>,
    unlisted: impl Fn(&str) -> Result<Vec<String>>,
) -> Result<RootAttrs> {
    let root = read_json(".")?.ok_or_else(|| Error::format(store, "no zarr.json at the root (not a Zarr v3 group)"))?;
    if root.get("zarr_format").and_then(Value::as_u64) != Some(3) {
        return Err(Error::format(store, "root zarr.json is not Zarr format 3"));
    }
    if root.get("node_type").and_then(Value::as_str) != Some("group") {
        return Err(Error::format(store, "root is not a Zarr group"));
    }
    for g in ["meta", "core"] {
        match read_json(g)? {
            Some(v) if v.get("node_type").and_then(Value::as_str) == Some("group") => {}
            _ => return Err(Error::format(store, format!("missing group {g}/"))),
        }
    }
    let mut attrs = root.get("attributes").and_then(Value::as_object).cloned().unwrap_or_default();
    let num_samples = match attrs.remove("num_samples") {
        // Pointers are int64 with num_samples + 1 entries: larger is no count.
        Some(v) => v
            .as_u64()
            .filter(|&n| n < i64::MAX as u64)
            .ok_or_else(|| Error::format(store, format!("num_samples attribute {v} is not a count")))?
            as usize,
        None => return Err(Error::format(store, "root attribute num_samples is missing")),
    };
    let mut fields = BTreeMap::new();
    if let Some(f) = attrs.remove("fields") {
        for (group, g) in [("core", StoreGroup::Core), ("custom", StoreGroup::Custom)] {
            if let Some(map) = f.get(group).and_then(Value::as_object) {
                for (name, level) in map {
                    // A listed name becomes a path under the store: no `..`, no `/`.
                    check_field_name(name).map_err(|why| Error::format(store, format!("fields.{group}: {why}")))?;
                    let level = level.as_str().and_then(Level::parse).ok_or_else(|| {
                        Error::format(store, format!("field {name}: level {level} is not atom/edge/system"))
                    })?;
                    fields.insert(name.clone(), FieldInfo { group: g, level });
                }
            }
        }
    }
    // Arrays present but not listed take the reference's fallback levels.
    for (group, g) in [("core", StoreGroup::Core), ("custom", StoreGroup::Custom)] {
        for name in unlisted(group)? {
            if fields.contains_key(&name) {
                continue;
            }
            let level = if g == StoreGroup::Core { default_level(&name) } else { Level::System };
            fields.insert(name, FieldInfo { group: g, level });
        }
    }
    Ok(RootAttrs { num_samples, fields, extra: attrs })
}

/// Writes the root group's zarr.json atomically and durably
/// ([`crate::store::durable::replace_file`]), so `num_samples` is the commit point
/// of an append: a crash leaves either the old or the new metadata, never a
/// torn file.
pub(crate) fn write_root(store: &Path, attrs: &RootAttrs) -> Result<()> {
    let bytes = root_bytes(store, attrs)?;
    let dst = store.join("zarr.json");
    crate::store::durable::replace_file(&dst, &bytes).map_err(|e| Error::io(&dst, e))
}

/// The root group's zarr.json holding `attrs`, as the writer writes it.
///
/// # Errors
/// [`Error::Format`] naming `store` if the attributes cannot be serialized
/// as JSON.
pub(crate) fn root_bytes(store: &Path, attrs: &RootAttrs) -> Result<Vec<u8>> {
    let mut core = Map::new();
    let mut custom = Map::new();
    for (name, info) in &attrs.fields {
        let m = if info.group == StoreGroup::Core { &mut core } else { &mut custom };
        m.insert(name.clone(), json!(info.level.as_str()));
    }
    let mut a = attrs.extra.clone();
    a.insert("num_samples".into(), json!(attrs.num_samples));
    a.insert("fields".into(), json!({"core": core, "custom": custom}));
    let doc = json!({"attributes": a, "zarr_format": 3, "node_type": "group"});
    serde_json::to_vec_pretty(&doc).map_err(|e| Error::format(store, e.to_string()))
}

/// Whether the root attributes list any field (`fields.core` or
/// `fields.custom` non-empty). A store with no listed field and no samples
/// holds no committed data: arrays in it are leftovers of an interrupted
/// first write.
///
/// # Errors
/// [`Error::Format`] when the root `zarr.json` is not valid JSON;
/// [`Error::Io`] naming it when it exists but cannot be read.
pub(crate) fn root_lists_fields(store: &Path) -> Result<bool> {
    let root = read_json(store, ".")?.unwrap_or_default();
    let listed = |g: &str| {
        root.pointer(&format!("/attributes/fields/{g}")).and_then(Value::as_object).is_some_and(|m| !m.is_empty())
    };
    Ok(listed("core") || listed("custom"))
}

/// Writes a plain group's zarr.json (meta/, core/, custom/), durably.
///
/// # Errors
/// [`Error::Io`] naming the `zarr.json` when it cannot be written or synced.
pub(crate) fn write_group(store: &Path, rel: &str) -> Result<()> {
    let doc = json!({"attributes": {}, "zarr_format": 3, "node_type": "group"});
    let p = store.join(rel).join("zarr.json");
    crate::store::durable::replace_file(&p, serde_json::to_vec_pretty(&doc).unwrap_or_default().as_slice())
        .map_err(|e| Error::io(&p, e))
}

/// The array path of field `name` in `group`.
pub fn field_path(group: StoreGroup, name: &str) -> String {
    format!("{}/{}", group.name(), name)
}

/// Folder inside a store where `add_custom` (and `add_filled`) write a new
/// array before it is listed and moved into `core/` or `custom/` (so readers
/// never see half of one).
pub const PENDING_DIR: &str = ".atomzarr-pending";

/// The group of string labels: one Zarr v3 `string` array (`vlen-utf8`)
/// per label, rows on the label's axis as for any field. A group of its own,
/// beside `core/` and `custom/`, because the toolkit turns every array of
/// those into a tensor (docs/LABELS.md).
pub const STRINGS_GROUP: &str = "strings";

/// The root attribute listing the string labels: `{name: level}`. Only
/// listed labels are read: the listing is their commit point.
pub const STRINGS_ATTR: &str = "strings";

/// The array path of string label `name`.
pub fn string_path(name: &str) -> String {
    format!("{STRINGS_GROUP}/{name}")
}

/// The string labels the root attributes list, by name.
///
/// # Errors
/// [`Error::Format`] naming `store` when the `strings` attribute is not an
/// object, lists an invalid name or a level other than atom or system, or
/// lists a name that is also a field.
pub fn string_fields(store: &Location, root: &RootAttrs) -> Result<BTreeMap<String, Level>> {
    let mut out = BTreeMap::new();
    let Some(v) = root.extra.get(STRINGS_ATTR) else { return Ok(out) };
    let map =
        v.as_object().ok_or_else(|| Error::format(store, format!("root attribute {STRINGS_ATTR} is not an object")))?;
    for (name, level) in map {
        check_field_name(name).map_err(|why| Error::format(store, format!("{STRINGS_ATTR}: {why}")))?;
        let level =
            level.as_str().and_then(Level::parse).filter(|l| *l != Level::Edge).ok_or_else(|| {
                Error::format(store, format!("string label {name}: level {level} is not atom or system"))
            })?;
        if root.fields.contains_key(name) {
            return Err(Error::format(store, format!("{name} is listed both as a field and as a string label")));
        }
        out.insert(name.clone(), level);
    }
    Ok(out)
}

/// Lists the string labels `labels` in the root attributes (written by
/// the writer).
pub(crate) fn set_string_fields(root: &mut RootAttrs, labels: &BTreeMap<String, Level>) {
    if labels.is_empty() {
        root.extra.remove(STRINGS_ATTR);
        return;
    }
    let map: Map<String, Value> = labels.iter().map(|(k, l)| (k.clone(), json!(l.as_str()))).collect();
    root.extra.insert(STRINGS_ATTR.into(), Value::Object(map));
}

/// Suffixes of the siblings `defragment` writes the new store to and moves
/// the original to (see [`sibling`]).
pub(crate) const DEFRAG_TMP: &str = ".defrag-tmp";
/// See [`DEFRAG_TMP`].
pub(crate) const DEFRAG_OLD: &str = ".defrag-old";
/// Suffix of the sibling a new store is built in before it is renamed into
/// place (see `AtomicDataZarrWriter::create`).
pub(crate) const CREATING: &str = ".atomzarr-creating";
/// Suffix of the sibling a `delete` builds the store's new `meta/` in
/// (links to the files it keeps, new mask chunks) before exchanging it
/// with the store's.
pub(crate) const DELETING: &str = ".atomzarr-deleting";

/// Where `add_custom` writes field `name`'s array before moving it into place
/// (relative to the store).
pub(crate) fn pending_path(name: &str) -> String {
    format!("{PENDING_DIR}/{name}")
}

/// A field listed in the root attributes whose array is still in
/// [`PENDING_DIR`]: an `add_custom` or `add_filled` stopped between listing
/// the field and moving its finished array into place. Returns `(name,
/// pending folder)`.
pub(crate) fn interrupted_add_custom(store: &Path, root: &RootAttrs) -> Option<(String, PathBuf)> {
    root.fields.iter().find_map(|(name, info)| {
        let pending = store.join(pending_path(name));
        let placed = store.join(field_path(info.group, name)).join("zarr.json");
        (!placed.exists() && pending.join("zarr.json").exists()).then(|| (name.clone(), pending))
    })
}

/// Where an interrupted `defragment` left the original store, when `store`
/// itself is missing: the writer renames the store to this sibling, then the
/// new copy into place, so a crash between the two leaves only the sibling.
pub(crate) fn interrupted_defragment(store: &Path) -> Option<PathBuf> {
    let old = sibling(store, DEFRAG_OLD);
    (!store.exists() && old.is_dir()).then_some(old)
}

/// A sibling path next to the store (`<store><suffix>`), for defragment.
pub fn sibling(store: &Path, suffix: &str) -> PathBuf {
    // By file name, not by string: `Path::file_name` ignores a trailing slash
    // ("s.zarr/" -> "s.zarr"), so the sibling lands beside the store and not
    // inside it. "." and ".." have no file name: use the absolute path.
    if let Some(name) = store.file_name() {
        let mut n = name.to_os_string();
        n.push(suffix);
        return store.with_file_name(n);
    }
    match std::fs::canonicalize(store) {
        Ok(abs) if abs.file_name().is_some() => sibling(&abs, suffix),
        _ => {
            let mut s = store.as_os_str().to_os_string();
            s.push(suffix);
            PathBuf::from(s)
        }
    }
}

/// Bytes and file count of a store's `rel` (`""`: the whole store): on
/// disk for a local store, the objects `source` lists for a remote one (an
/// HTTP server lists none: `(0, 0)`).
///
/// # Errors
/// The error of listing a remote store.
pub(crate) fn store_usage(location: &crate::Location, source: &dyn ByteSource, rel: &str) -> Result<(u64, u64)> {
    if let Some(local) = location.local() {
        return Ok(disk_usage(&local.join(rel)));
    }
    Ok(source.list_sizes(rel)?.map_or((0, 0), |v| (v.iter().map(|(_, n)| n).sum(), v.len() as u64)))
}

/// Bytes on disk and file count under `path`.
pub fn disk_usage(path: &Path) -> (u64, u64) {
    let mut bytes = 0;
    let mut files = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else { continue };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => {
                    bytes += m.len();
                    files += 1;
                }
                Err(_) => {}
            }
        }
    }
    (bytes, files)
}

/// The root attribute this crate keeps its own records in (saved splits and
/// statistics, the layout generation).
pub const ATTR: &str = "atomzarr";

/// How many times a defragment renumbered the store's samples (0: never).
pub(crate) fn layout_generation(extra: &Map<String, Value>) -> u64 {
    extra.get(ATTR).and_then(|a| a.get("layout_generation")).and_then(Value::as_u64).unwrap_or(0)
}

/// Records in root attributes `extra` that a defragment renumbered the
/// samples (it dropped deleted ones): splits keyed by physical index and
/// statistics saved before are then known to be out of date.
pub(crate) fn note_renumbered(extra: &mut Map<String, Value>) {
    let next = layout_generation(extra) + 1;
    let ours = extra.entry(ATTR).or_insert_with(|| json!({}));
    if !ours.is_object() {
        *ours = json!({});
    }
    if let Some(m) = ours.as_object_mut() {
        m.insert("layout_generation".into(), json!(next));
    }
}
