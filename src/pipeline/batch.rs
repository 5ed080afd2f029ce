//! [`AtomicBatch`]: a batch on a Burn device, as one disjoint graph, and
//! [`AtomicBatcher`], Burn's `Batcher` producing it.
//!
//! Every field is one tensor over the batch's rows (atoms, edges or graphs);
//! `neighbor_list` holds batch-local atom indices; `graph_index[v]` is the
//! graph of atom `v`; `atoms_ptr` / `edges_ptr` are the `[B+1]` CSR offsets.
//!
//! ```
//! use burn::tensor::Device;
//! use burn::data::dataloader::batcher::Batcher;
//! use atomzarr::{AtomicBatch, AtomicBatcher, AtomicData};
//! let a = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.7, 0.0, 0.0]]).unwrap()
//!     .with_neighbor_list(vec![[0, 1], [1, 0]], None).unwrap().with_energy(-1.0);
//! let b = AtomicData::new(vec![8], vec![[0.0; 3]]).unwrap()
//!     .with_neighbor_list(vec![], None).unwrap().with_energy(-2.0);
//! let batch: AtomicBatch = AtomicBatcher::default().batch(vec![a, b.clone(), b], &Device::flex());
//! assert_eq!(batch.num_graphs, 3);
//! assert_eq!(batch.graph_index.to_data().try_to_vec::<i32>().unwrap(), vec![0, 0, 1, 2]);
//! assert_eq!(batch.energy().unwrap().dims(), [3, 1]);
//! ```

use std::collections::BTreeMap;

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, HostData, Level, StringField};
use crate::data::{BufferHome, CollatedBatch};
use crate::error::{Error, Result};
use crate::pipeline::stage::{self, Kind};

/// A field's tensor, flat over all elements, by element kind.
#[derive(Debug, Clone)]
pub enum BatchData {
    /// Floating point fields (in the backend's float type).
    Float(Tensor<1>),
    /// Integer fields (in the backend's int type).
    Int(Tensor<1, Int>),
    /// Boolean fields.
    Bool(Tensor<1, Bool>),
}

/// Fields read back to the host by [`AtomicBatch::to_host_f64`]: by name,
/// the shape and the values as f64.
pub type HostFields = BTreeMap<String, (Vec<usize>, Vec<f64>)>;

/// One field of a device batch.
#[derive(Debug, Clone)]
pub struct BatchField {
    /// Atom, edge or system.
    pub level: Level,
    /// Full shape `[rows, trailing...]`.
    pub shape: Vec<usize>,
    /// The data, flat.
    pub data: BatchData,
}

/// A batch of atomic structures on a device, as one disjoint graph.
#[derive(Debug, Clone)]
pub struct AtomicBatch {
    /// Graphs (samples) in the batch.
    pub num_graphs: usize,
    /// Total atoms `V`.
    pub num_atoms: usize,
    /// Total edges `E`.
    pub num_edges: usize,
    /// `[V]` graph of each atom.
    pub graph_index: Tensor<1, Int>,
    /// `[B+1]` atom offsets.
    pub atoms_ptr: Tensor<1, Int>,
    /// `[B+1]` edge offsets.
    pub edges_ptr: Tensor<1, Int>,
    /// `atoms_ptr` on the host, for shaping work per graph without reading
    /// the device.
    pub host_atoms_ptr: Vec<i64>,
    /// `edges_ptr` on the host.
    pub host_edges_ptr: Vec<i64>,
    /// Every field by name.
    pub fields: BTreeMap<String, BatchField>,
    /// Logical indices of the samples, in batch order (host side).
    pub indices: Vec<usize>,
    /// String labels (`config_type`, `mp_id`, ...), host side: one value per
    /// graph (system labels) or per atom (atom labels), in batch order.
    pub strings: BTreeMap<String, StringField>,
}

/// The dtype `device` creates int tensors in.
pub(crate) fn device_int_dtype(device: &Device) -> burn::tensor::DType {
    stage::device_dtype(&stage::settings(device), Kind::Int)
}

/// `graph_index` (the graph of each atom) from the atom offsets, in int32
/// when the device's ints are and the graph count fits, else int64.
fn graph_index(atoms_ptr: &[i64], num_atoms: usize, int: burn::tensor::DType) -> HostData {
    let graphs = atoms_ptr.windows(2).enumerate().map(|(k, w)| (k, (w[1] - w[0]).max(0) as usize));
    if int == burn::tensor::DType::I32 && i32::try_from(atoms_ptr.len()).is_ok() {
        let mut v: Vec<i32> = Vec::with_capacity(num_atoms);
        for (k, n) in graphs {
            v.extend(std::iter::repeat_n(k as i32, n));
        }
        HostData::Int32(v)
    } else {
        let mut v: Vec<i64> = Vec::with_capacity(num_atoms);
        for (k, n) in graphs {
            v.extend(std::iter::repeat_n(k as i64, n));
        }
        HostData::Int64(v)
    }
}

/// A batch's layout before upload; its buffers travel beside it as
/// [`HostParts`], the three index tensors first (`graph_index`,
/// `atoms_ptr`, `edges_ptr`), then the fields in name order.
struct Layout {
    num_graphs: usize,
    num_atoms: usize,
    num_edges: usize,
    atoms_ptr: Vec<i64>,
    edges_ptr: Vec<i64>,
    indices: Vec<usize>,
    strings: BTreeMap<String, StringField>,
    fields: Vec<(String, Level, Vec<usize>, Kind)>,
}

/// Each buffer of a batch with its name and the device dtype it becomes.
type HostParts = Vec<(String, HostData, burn::tensor::DType)>;

const INDEX_NAMES: [&str; 3] = ["graph_index", "atoms_ptr", "edges_ptr"];

fn split(batch: CollatedBatch, settings: &burn::tensor::DeviceSettings) -> (Layout, HostParts, BufferHome) {
    let int = stage::device_dtype(settings, Kind::Int);
    let (num_graphs, num_atoms, num_edges) = (batch.num_graphs(), batch.num_atoms(), batch.num_edges());
    let (atoms_ptr, edges_ptr) = (batch.atoms_ptr.clone(), batch.edges_ptr.clone());
    let mut parts: HostParts = vec![
        (INDEX_NAMES[0].into(), graph_index(&batch.atoms_ptr, num_atoms, int), int),
        (INDEX_NAMES[1].into(), HostData::Int64(batch.atoms_ptr), int),
        (INDEX_NAMES[2].into(), HostData::Int64(batch.edges_ptr), int),
    ];
    let mut fields = Vec::with_capacity(batch.fields.len());
    for (name, f) in batch.fields {
        let k = stage::kind(&f.data);
        fields.push((name.clone(), f.level, f.shape(), k));
        parts.push((name, f.data, stage::device_dtype(settings, k)));
    }
    (
        Layout {
            num_graphs,
            num_atoms,
            num_edges,
            atoms_ptr,
            edges_ptr,
            indices: batch.indices,
            strings: batch.strings,
            fields,
        },
        parts,
        batch.buffers,
    )
}

impl Layout {
    /// Creates the tensors on `device` from their data (in [`HostParts`]
    /// order, each already in its device dtype).
    fn upload(self, tensors: Vec<TensorData>, device: &Device) -> Result<AtomicBatch> {
        let mut it = tensors.into_iter();
        let mut next_int = |name: &str| -> Result<Tensor<1, Int>> {
            let d = it.next().ok_or_else(|| Error::Device { field: name.into(), reason: "no tensor data".into() })?;
            Ok(Tensor::from_data(d, device))
        };
        let graph_index = next_int(INDEX_NAMES[0])?;
        let atoms_ptr = next_int(INDEX_NAMES[1])?;
        let edges_ptr = next_int(INDEX_NAMES[2])?;
        let mut fields = BTreeMap::new();
        for ((name, level, shape, k), d) in self.fields.into_iter().zip(it) {
            let data = match k {
                Kind::Float => BatchData::Float(Tensor::from_data(d, device)),
                Kind::Int => BatchData::Int(Tensor::from_data(d, device)),
                Kind::Bool => BatchData::Bool(Tensor::from_data(d, device)),
            };
            fields.insert(name, BatchField { level, shape, data });
        }
        Ok(AtomicBatch {
            num_graphs: self.num_graphs,
            num_atoms: self.num_atoms,
            num_edges: self.num_edges,
            graph_index,
            atoms_ptr,
            edges_ptr,
            host_atoms_ptr: self.atoms_ptr,
            host_edges_ptr: self.edges_ptr,
            fields,
            indices: self.indices,
            strings: self.strings,
        })
    }
}

/// Reads a device tensor back to the host (an error, never empty data, when
/// the device cannot).
fn read_back<const D: usize, K: burn::tensor::kind::Basic>(name: &str, t: &Tensor<D, K>) -> Result<TensorData> {
    t.clone()
        .try_into_data()
        .map_err(|e| Error::Device { field: name.to_string(), reason: format!("read-back failed: {e:?}") })
}

impl AtomicBatch {
    /// Moves a host batch to `device`, every field in the device's dtype for
    /// its kind (float, int, bool), converted on the host so that
    /// `Tensor::from_data` converts nothing. With `pin`, the buffers go
    /// through the backend's `staging` (page-locked memory on CUDA, which
    /// the conversion writes into directly; nothing on CPU backends and
    /// wgpu) so the copy to the device is a DMA from pinned memory.
    ///
    /// # Errors
    /// [`Error::Device`] naming the field and element for a value the device
    /// dtype cannot hold (an int64 index beyond int32).
    pub fn from_collated(batch: CollatedBatch, device: &Device, pin: bool) -> Result<AtomicBatch> {
        if pin {
            return Self::from_collated_staged(batch, device, |datas| device.staging(datas.iter_mut()));
        }
        let (layout, parts, home) = split(batch, &stage::settings(device));
        let tensors = parts
            .into_iter()
            .map(|(name, data, dtype)| stage::host_tensor_data(&name, data, dtype, &home))
            .collect::<Result<Vec<_>>>()?;
        layout.upload(tensors, device)
    }

    /// As [`from_collated`](Self::from_collated) with pinning, `stage`
    /// standing in for Burn's `Device::staging`: it is handed every buffer
    /// of the batch, each announcing the device's dtype, and may swap each
    /// for a buffer of its own after filling it with the buffer's
    /// `Bytes::copy_into` (which writes the converted values), as `staging`
    /// does with pinned memory. Buffers it leaves alone are converted on the
    /// host afterwards. Use it to upload from page-locked memory you
    /// allocate yourself, or to observe the buffers the device copies from.
    ///
    /// ```
    /// use burn::tensor::Device;
    /// use atomzarr::{AtomicBatch, AtomicData, CollatedBatch};
    /// let s = AtomicData::new(vec![8, 1], vec![[0.0; 3]; 2]).unwrap().with_pbc([true, false, true]);
    /// let host = CollatedBatch::from_samples(&[0], &[s]).unwrap();
    /// let mut seen = Vec::new();
    /// let batch = AtomicBatch::from_collated_staged(host, &Device::flex(), |datas| {
    ///     seen = datas.iter().map(|d| d.dtype()).collect();
    /// })
    /// .unwrap();
    /// assert_eq!(seen.len(), 3 + 3); // graph_index, atoms_ptr, edges_ptr, then the fields
    /// assert_eq!(batch.pbc().unwrap().to_data().try_to_vec::<bool>().unwrap(), vec![true, false, true]);
    /// ```
    ///
    /// # Errors
    /// As [`from_collated`](Self::from_collated).
    pub fn from_collated_staged(
        batch: CollatedBatch,
        device: &Device,
        stage: impl FnOnce(&mut [TensorData]),
    ) -> Result<AtomicBatch> {
        let (layout, parts, home) = split(batch, &stage::settings(device));
        let (mut datas, rest): (Vec<TensorData>, Vec<stage::Staged>) = parts
            .into_iter()
            .map(|(name, data, dtype)| stage::prepare(&name, data, dtype, &home))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        stage(&mut datas);
        let tensors = rest.into_iter().zip(datas).map(|(s, d)| s.finish(d)).collect::<Result<Vec<_>>>()?;
        layout.upload(tensors, device)
    }

    /// A field's data and its shape as a rank-`D` array (`None` if absent or
    /// of another rank).
    fn shaped<const D: usize>(&self, name: &str) -> Option<(&BatchData, [usize; D])> {
        let f = self.fields.get(name)?;
        Some((&f.data, f.shape.clone().try_into().ok()?))
    }

    /// A float field reshaped to its full shape of rank `D` (`None` if
    /// absent, not float, or of another rank).
    pub fn float<const D: usize>(&self, name: &str) -> Option<Tensor<D>> {
        match self.shaped::<D>(name)? {
            (BatchData::Float(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// An integer field reshaped to rank `D`.
    pub fn int<const D: usize>(&self, name: &str) -> Option<Tensor<D, Int>> {
        match self.shaped::<D>(name)? {
            (BatchData::Int(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// A bool field reshaped to rank `D`.
    pub fn bool<const D: usize>(&self, name: &str) -> Option<Tensor<D, Bool>> {
        match self.shaped::<D>(name)? {
            (BatchData::Bool(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// Every field read back to the host as f64 (ints and bools too), with
    /// its shape: for checks and debugging, not the training path (it syncs).
    ///
    /// # Errors
    /// [`Error::Device`] naming a field the device cannot read back.
    pub fn to_host_f64(&self) -> Result<HostFields> {
        self.fields
            .iter()
            .map(|(name, f)| {
                let data = match &f.data {
                    BatchData::Float(t) => read_back(name, t)?,
                    BatchData::Int(t) => read_back(name, t)?,
                    BatchData::Bool(t) => read_back(name, t)?,
                };
                let dtype = data.dtype();
                let v = data.try_into_vec_as::<f64>().map_err(|e| Error::Device {
                    field: name.clone(),
                    reason: format!("{dtype:?} data does not read back as f64: {e:?}"),
                })?;
                Ok((name.clone(), (f.shape.clone(), v)))
            })
            .collect()
    }

    /// `positions` `[V, 3]`.
    pub fn positions(&self) -> Option<Tensor<2>> {
        self.float("positions")
    }
    /// `atomic_numbers` `[V]`.
    pub fn atomic_numbers(&self) -> Option<Tensor<1, Int>> {
        self.int("atomic_numbers")
    }
    /// `neighbor_list` `[E, 2]`, batch-local atom indices.
    pub fn neighbor_list(&self) -> Option<Tensor<2, Int>> {
        self.int(NEIGHBOR_LIST)
    }
    /// `shifts` `[E, 3]`.
    pub fn shifts(&self) -> Option<Tensor<2>> {
        self.float("shifts")
    }
    /// `forces` `[V, 3]`.
    pub fn forces(&self) -> Option<Tensor<2>> {
        self.float("forces")
    }
    /// `velocities` `[V, 3]`.
    pub fn velocities(&self) -> Option<Tensor<2>> {
        self.float("velocities")
    }
    /// `energy` `[B, 1]`.
    pub fn energy(&self) -> Option<Tensor<2>> {
        self.float("energy")
    }
    /// `cell` `[B, 3, 3]`.
    pub fn cell(&self) -> Option<Tensor<3>> {
        self.float("cell")
    }
    /// `pbc` `[B, 3]`.
    pub fn pbc(&self) -> Option<Tensor<2, Bool>> {
        self.bool("pbc")
    }
    /// `stress` `[B, 3, 3]`.
    pub fn stress(&self) -> Option<Tensor<3>> {
        self.float("stress")
    }
    /// `charges` `[V]`.
    pub fn charges(&self) -> Option<Tensor<1>> {
        self.float("charges")
    }
    /// A string label's values, one per graph (system labels) or per atom
    /// (atom labels): for per-config weights, splits and logging.
    ///
    /// ```
    /// use burn::tensor::Device;
    /// use atomzarr::{AtomicBatch, AtomicBatcher, AtomicData};
    /// let a = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_string("config_type", "atom");
    /// let b = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2]).unwrap().with_string("config_type", "dimer");
    /// let batch: AtomicBatch = AtomicBatcher::default().try_batch(&[a, b], &Device::flex()).unwrap();
    /// assert_eq!(batch.strings("config_type").unwrap(), ["atom", "dimer"]);
    /// ```
    pub fn strings(&self, name: &str) -> Option<&[String]> {
        self.strings.get(name).map(|f| f.values.as_slice())
    }
}

/// Burn's `Batcher` from samples to an [`AtomicBatch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AtomicBatcher {
    /// Stage host buffers through the backend's pinned memory before upload.
    pub pin_memory: bool,
}

impl AtomicBatcher {
    /// A batcher; `pin_memory` stages uploads through pinned memory.
    pub fn new(pin_memory: bool) -> Self {
        AtomicBatcher { pin_memory }
    }

    /// Batches samples, returning an error when they disagree in fields,
    /// dtypes or trailing shapes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] or [`Error::NeighborIndex`] as
    /// [`CollatedBatch::fill_from_samples`]; [`Error::Device`] as
    /// [`AtomicBatch::from_collated`].
    pub fn try_batch(&self, items: &[AtomicData], device: &Device) -> Result<AtomicBatch> {
        let idx: Vec<usize> = (0..items.len()).collect();
        AtomicBatch::from_collated(CollatedBatch::from_samples(&idx, items)?, device, self.pin_memory)
    }
}

impl Batcher<AtomicData, AtomicBatch> for AtomicBatcher {
    /// Burn's trait cannot return an error: samples that disagree in fields,
    /// dtypes or trailing shapes stop with a message saying which (use
    /// [`AtomicBatcher::try_batch`] to get the error instead).
    fn batch(&self, items: Vec<AtomicData>, device: &Device) -> AtomicBatch {
        match self.try_batch(&items, device) {
            Ok(b) => b,
            Err(e) => panic!("AtomicBatcher: cannot batch these samples: {e}"),
        }
    }
}

/// The batcher for Burn's own loaders where a bad batch should reach the
/// training loop as an error rather than stop the program: a
/// `DataLoaderBuilder::new(AtomicBatcher::default())` whose output type is
/// `atomzarr::Result<AtomicBatch>` yields each batch's error as a value.
///
/// ```
/// use burn::data::dataloader::batcher::Batcher;
/// use burn::tensor::Device;
/// use atomzarr::{AtomicBatcher, AtomicData};
/// let a = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_energy(1.0);
/// let b = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap(); // no energy
/// let r: atomzarr::Result<atomzarr::AtomicBatch> = AtomicBatcher::default().batch(vec![a, b], &Device::flex());
/// assert!(r.is_err());
/// ```
impl Batcher<AtomicData, Result<AtomicBatch>> for AtomicBatcher {
    fn batch(&self, items: Vec<AtomicData>, device: &Device) -> Result<AtomicBatch> {
        self.try_batch(&items, device)
    }
}

impl Batcher<CollatedBatch, AtomicBatch> for AtomicBatcher {
    /// Uploads each host batch; several are concatenated into one graph.
    /// Burn's trait cannot return an error: a batch that cannot be split or
    /// uploaded stops with a message saying why.
    fn batch(&self, mut items: Vec<CollatedBatch>, device: &Device) -> AtomicBatch {
        let one = if items.len() == 1 {
            items.pop().ok_or_else(|| Error::Internal("no host batch".into()))
        } else {
            let mut samples = Vec::new();
            let mut idx = Vec::new();
            for b in &items {
                match b.to_samples() {
                    Ok(s) => samples.extend(s),
                    Err(e) => panic!("AtomicBatcher: cannot split a host batch: {e}"),
                }
                idx.extend(&b.indices);
            }
            CollatedBatch::from_samples(&idx, &samples)
        };
        match one.and_then(|c| AtomicBatch::from_collated(c, device, self.pin_memory)) {
            Ok(b) => b,
            Err(e) => panic!("AtomicBatcher: cannot batch these host batches: {e}"),
        }
    }
}

/// A transform applied to each device batch, in order, before it is yielded.
pub type BatchTransform = std::sync::Arc<dyn Fn(AtomicBatch) -> Result<AtomicBatch> + Send + Sync>;
