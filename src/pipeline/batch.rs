//! [`AtomicBatch`]: a batch on a Burn device, as one disjoint graph, and
//! [`AtomicBatcher`], Burn's `Batcher` producing it.
//!
//! Every field is one tensor over the batch's rows (atoms, edges or graphs);
//! `neighbor_list` holds batch-local atom indices; `graph_index[v]` is the
//! graph of atom `v`; `atoms_ptr` / `edges_ptr` are the `[B+1]` CSR offsets.
//!
//! ```
//! use burn::backend::Flex;
//! use burn::data::dataloader::batcher::Batcher;
//! use atomzarr::{AtomicBatch, AtomicBatcher, AtomicData};
//! let a = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.7, 0.0, 0.0]]).unwrap()
//!     .with_neighbor_list(vec![[0, 1], [1, 0]], None).unwrap().with_energy(-1.0);
//! let b = AtomicData::new(vec![8], vec![[0.0; 3]]).unwrap()
//!     .with_neighbor_list(vec![], None).unwrap().with_energy(-2.0);
//! let batch: AtomicBatch<Flex> = AtomicBatcher::default().batch(vec![a, b.clone(), b], &Default::default());
//! assert_eq!(batch.num_graphs, 3);
//! assert_eq!(batch.graph_index.to_data().to_vec::<i32>().unwrap(), vec![0, 0, 1, 2]);
//! assert_eq!(batch.energy().unwrap().dims(), [3, 1]);
//! ```

use std::collections::BTreeMap;

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, ElementConversion, Int, Tensor, TensorData};

use crate::data::CollatedBatch;
use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, HostData, Level, StringField};
use crate::error::Result;

/// A field's tensor, flat over all elements, by element kind.
#[derive(Debug, Clone)]
pub enum BatchData<B: Backend> {
    /// Floating point fields (in the backend's float type).
    Float(Tensor<B, 1>),
    /// Integer fields (in the backend's int type).
    Int(Tensor<B, 1, Int>),
    /// Boolean fields.
    Bool(Tensor<B, 1, Bool>),
}

/// One field of a device batch.
#[derive(Debug, Clone)]
pub struct BatchField<B: Backend> {
    /// Atom, edge or system.
    pub level: Level,
    /// Full shape `[rows, trailing...]`.
    pub shape: Vec<usize>,
    /// The data, flat.
    pub data: BatchData<B>,
}

/// A batch of atomic structures on a device, as one disjoint graph.
#[derive(Debug, Clone)]
pub struct AtomicBatch<B: Backend> {
    /// Graphs (samples) in the batch.
    pub num_graphs: usize,
    /// Total atoms `V`.
    pub num_atoms: usize,
    /// Total edges `E`.
    pub num_edges: usize,
    /// `[V]` graph of each atom.
    pub graph_index: Tensor<B, 1, Int>,
    /// `[B+1]` atom offsets.
    pub atoms_ptr: Tensor<B, 1, Int>,
    /// `[B+1]` edge offsets.
    pub edges_ptr: Tensor<B, 1, Int>,
    /// Every field by name.
    pub fields: BTreeMap<String, BatchField<B>>,
    /// Logical indices of the samples, in batch order (host side).
    pub indices: Vec<usize>,
    /// String labels (`config_type`, `mp_id`, ...), host side: one value per
    /// graph (system labels) or per atom (atom labels), in batch order.
    pub strings: BTreeMap<String, StringField>,
}

/// The dtype `device` creates int tensors in.
pub(crate) fn device_int_dtype<B: Backend>(device: &B::Device) -> burn::tensor::DType {
    burn::tensor::get_device_settings::<B>(device).int_dtype.into()
}

fn host_to_tensor_data(data: HostData, shape: [usize; 1], int_dtype: burn::tensor::DType) -> TensorData {
    // Narrow int64 to an int32 device with a plain cast when every value fits
    // (atom indices and atomic numbers always do): Burn's generic per-element
    // conversion is several times slower. The DataLoader has its reader
    // narrow once per cached chunk (CollateOptions), so this pass only runs
    // for batches built elsewhere.
    if let HostData::Int64(v) = &data
        && int_dtype == burn::tensor::DType::I32
        && let Some(narrow) = crate::data::narrow_i64(v)
    {
        return TensorData::new(narrow, shape);
    }
    match data {
        HostData::Bool(v) => TensorData::new(v, shape),
        HostData::Int8(v) => TensorData::new(v, shape),
        HostData::Int16(v) => TensorData::new(v, shape),
        HostData::Int32(v) => TensorData::new(v, shape),
        HostData::Int64(v) => TensorData::new(v, shape),
        HostData::UInt8(v) => TensorData::new(v, shape),
        HostData::UInt16(v) => TensorData::new(v, shape),
        HostData::UInt32(v) => TensorData::new(v, shape),
        HostData::UInt64(v) => TensorData::new(v, shape),
        HostData::Float32(v) => TensorData::new(v, shape),
        HostData::Float64(v) => TensorData::new(v, shape),
        // Half types are widened: backends differ in which they accept.
        other @ (HostData::Float16(_) | HostData::BFloat16(_)) => {
            TensorData::new(other.to_f64_vec().into_iter().map(|x| x as f32).collect::<Vec<f32>>(), shape)
        }
    }
}

enum Kind {
    Float,
    Int,
    Bool,
}

fn kind(d: &HostData) -> Kind {
    match d {
        HostData::Bool(_) => Kind::Bool,
        HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_) => Kind::Float,
        _ => Kind::Int,
    }
}

impl<B: Backend> AtomicBatch<B> {
    /// Moves a host batch to `device`. With `pin`, the host buffers are first
    /// handed to the backend's `staging` (page-locked memory on CUDA; a no-op
    /// on CPU backends) so the copy can be asynchronous.
    pub fn from_collated(batch: CollatedBatch, device: &B::Device, pin: bool) -> AtomicBatch<B> {
        let num_graphs = batch.num_graphs();
        let (num_atoms, num_edges) = (batch.num_atoms(), batch.num_edges());
        // Index tensors are built in the backend's int type, so `from_data`
        // does not convert them again.
        let int = |x: i64| -> B::IntElem { x.elem() };
        let mut graph: Vec<B::IntElem> = Vec::with_capacity(num_atoms);
        for (k, w) in batch.atoms_ptr.windows(2).enumerate() {
            graph.extend(std::iter::repeat_n(int(k as i64), (w[1] - w[0]) as usize));
        }
        let mut datas: Vec<TensorData> = Vec::with_capacity(batch.fields.len() + 3);
        datas.push(TensorData::new(graph, [num_atoms]));
        datas.push(TensorData::new(batch.atoms_ptr.iter().map(|&x| int(x)).collect::<Vec<_>>(), [num_graphs + 1]));
        datas.push(TensorData::new(batch.edges_ptr.iter().map(|&x| int(x)).collect::<Vec<_>>(), [num_graphs + 1]));
        let mut meta = Vec::with_capacity(batch.fields.len());
        let int_dtype = device_int_dtype::<B>(device);
        for (name, f) in batch.fields {
            let shape = f.shape();
            let k = kind(&f.data);
            let n = f.data.len();
            datas.push(host_to_tensor_data(f.data, [n], int_dtype));
            meta.push((name, f.level, shape, k));
        }
        if pin {
            B::staging(datas.iter_mut(), device);
        }
        let mut it = datas.into_iter();
        // The three index tensors were pushed first, in this order.
        let next_int = |it: &mut std::vec::IntoIter<TensorData>| -> Tensor<B, 1, Int> {
            Tensor::from_data(it.next().unwrap_or_else(|| TensorData::new(Vec::<i64>::new(), [0])), device)
        };
        let graph_index = next_int(&mut it);
        let atoms_ptr = next_int(&mut it);
        let edges_ptr = next_int(&mut it);
        let mut fields = BTreeMap::new();
        for ((name, level, shape, k), d) in meta.into_iter().zip(it) {
            let data = match k {
                Kind::Float => BatchData::Float(Tensor::from_data(d, device)),
                Kind::Int => BatchData::Int(Tensor::from_data(d, device)),
                Kind::Bool => BatchData::Bool(Tensor::from_data(d, device)),
            };
            fields.insert(name, BatchField { level, shape, data });
        }
        AtomicBatch {
            num_graphs,
            num_atoms,
            num_edges,
            graph_index,
            atoms_ptr,
            edges_ptr,
            fields,
            indices: batch.indices,
            strings: batch.strings,
        }
    }

    /// A field's data and its shape as a rank-`D` array (`None` if absent or
    /// of another rank).
    fn shaped<const D: usize>(&self, name: &str) -> Option<(&BatchData<B>, [usize; D])> {
        let f = self.fields.get(name)?;
        Some((&f.data, f.shape.clone().try_into().ok()?))
    }

    /// A float field reshaped to its full shape of rank `D` (`None` if
    /// absent, not float, or of another rank).
    pub fn float<const D: usize>(&self, name: &str) -> Option<Tensor<B, D>> {
        match self.shaped::<D>(name)? {
            (BatchData::Float(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// An integer field reshaped to rank `D`.
    pub fn int<const D: usize>(&self, name: &str) -> Option<Tensor<B, D, Int>> {
        match self.shaped::<D>(name)? {
            (BatchData::Int(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// A bool field reshaped to rank `D`.
    pub fn bool<const D: usize>(&self, name: &str) -> Option<Tensor<B, D, Bool>> {
        match self.shaped::<D>(name)? {
            (BatchData::Bool(t), shape) => Some(t.clone().reshape(shape)),
            _ => None,
        }
    }

    /// Every field read back to the host as f64 (ints and bools too), with
    /// its shape: for checks and debugging, not the training path (it syncs).
    pub fn to_host_f64(&self) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
        self.fields
            .iter()
            .map(|(name, f)| {
                let v: Vec<f64> = match &f.data {
                    BatchData::Float(t) => t.to_data().convert::<f64>().to_vec::<f64>().unwrap_or_default(),
                    BatchData::Int(t) => t.to_data().convert::<f64>().to_vec::<f64>().unwrap_or_default(),
                    BatchData::Bool(t) => t
                        .to_data()
                        .to_vec::<bool>()
                        .unwrap_or_default()
                        .into_iter()
                        .map(|x| f64::from(u8::from(x)))
                        .collect(),
                };
                (name.clone(), (f.shape.clone(), v))
            })
            .collect()
    }

    /// `positions` `[V, 3]`.
    pub fn positions(&self) -> Option<Tensor<B, 2>> {
        self.float("positions")
    }
    /// `atomic_numbers` `[V]`.
    pub fn atomic_numbers(&self) -> Option<Tensor<B, 1, Int>> {
        self.int("atomic_numbers")
    }
    /// `neighbor_list` `[E, 2]`, batch-local atom indices.
    pub fn neighbor_list(&self) -> Option<Tensor<B, 2, Int>> {
        self.int(NEIGHBOR_LIST)
    }
    /// `shifts` `[E, 3]`.
    pub fn shifts(&self) -> Option<Tensor<B, 2>> {
        self.float("shifts")
    }
    /// `forces` `[V, 3]`.
    pub fn forces(&self) -> Option<Tensor<B, 2>> {
        self.float("forces")
    }
    /// `velocities` `[V, 3]`.
    pub fn velocities(&self) -> Option<Tensor<B, 2>> {
        self.float("velocities")
    }
    /// `energy` `[B, 1]`.
    pub fn energy(&self) -> Option<Tensor<B, 2>> {
        self.float("energy")
    }
    /// `cell` `[B, 3, 3]`.
    pub fn cell(&self) -> Option<Tensor<B, 3>> {
        self.float("cell")
    }
    /// `pbc` `[B, 3]`.
    pub fn pbc(&self) -> Option<Tensor<B, 2, Bool>> {
        self.bool("pbc")
    }
    /// `stress` `[B, 3, 3]`.
    pub fn stress(&self) -> Option<Tensor<B, 3>> {
        self.float("stress")
    }
    /// `charges` `[V]`.
    pub fn charges(&self) -> Option<Tensor<B, 1>> {
        self.float("charges")
    }
    /// A string label's values, one per graph (system labels) or per atom
    /// (atom labels): for per-config weights, splits and logging.
    ///
    /// ```
    /// use burn::backend::Flex;
    /// use atomzarr::{AtomicBatch, AtomicBatcher, AtomicData};
    /// let a = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_string("config_type", "atom");
    /// let b = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2]).unwrap().with_string("config_type", "dimer");
    /// let batch: AtomicBatch<Flex> = AtomicBatcher::default().try_batch(&[a, b], &Default::default()).unwrap();
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
    pub fn try_batch<B: Backend>(&self, items: &[AtomicData], device: &B::Device) -> Result<AtomicBatch<B>> {
        let idx: Vec<usize> = (0..items.len()).collect();
        Ok(AtomicBatch::from_collated(CollatedBatch::from_samples(&idx, items)?, device, self.pin_memory))
    }
}

impl<B: Backend> Batcher<B, AtomicData, AtomicBatch<B>> for AtomicBatcher {
    /// Burn's trait cannot return an error: samples that disagree in fields,
    /// dtypes or trailing shapes stop with a message saying which (use
    /// [`AtomicBatcher::try_batch`] to get the error instead).
    fn batch(&self, items: Vec<AtomicData>, device: &B::Device) -> AtomicBatch<B> {
        match self.try_batch(&items, device) {
            Ok(b) => b,
            Err(e) => panic!("AtomicBatcher: cannot batch these samples: {e}"),
        }
    }
}

impl<B: Backend> Batcher<B, CollatedBatch, AtomicBatch<B>> for AtomicBatcher {
    /// Uploads each host batch; several are concatenated into one graph.
    fn batch(&self, mut items: Vec<CollatedBatch>, device: &B::Device) -> AtomicBatch<B> {
        if items.len() == 1
            && let Some(one) = items.pop()
        {
            return AtomicBatch::from_collated(one, device, self.pin_memory);
        }
        let mut samples = Vec::new();
        let mut idx = Vec::new();
        for b in &items {
            match b.to_samples() {
                Ok(s) => samples.extend(s),
                Err(e) => panic!("AtomicBatcher: cannot split a host batch: {e}"),
            }
            idx.extend(&b.indices);
        }
        match CollatedBatch::from_samples(&idx, &samples) {
            Ok(c) => AtomicBatch::from_collated(c, device, self.pin_memory),
            Err(e) => panic!("AtomicBatcher: cannot batch these host batches: {e}"),
        }
    }
}
