//! [`MultiReaderOptions`]: how a [`MultiReader`](crate::MultiReader) mixes
//! its children (strict fields or their union, the fields it adds, the
//! cache budget they share), and the names of the fields it adds.

use crate::source::DEFAULT_CACHE_BYTES;

/// Options of [`MultiReader::with_options`](crate::MultiReader::with_options).
///
/// ```
/// let o = atomzarr::MultiReaderOptions::default();
/// assert!(o.output_strict());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiReaderOptions {
    /// Require every non-empty child to have the same field names and levels
    /// (default on). Off: the mixture's fields are the union of its
    /// children's (see [`MultiReaderOptions::with_output_strict`]).
    pub(crate) output_strict: bool,
    /// Add the system field [`DATASET_INDEX`] (default off).
    pub(crate) dataset_index: bool,
    /// The decoded-chunk budget the children share.
    pub(crate) cache_bytes: u64,
}

impl Default for MultiReaderOptions {
    fn default() -> Self {
        MultiReaderOptions { output_strict: true, dataset_index: false, cache_bytes: DEFAULT_CACHE_BYTES }
    }
}

/// The system field (int64, one value per sample) that says which child a
/// sample came from, with [`MultiReaderOptions::with_dataset_index`].
pub const DATASET_INDEX: &str = "dataset_index";

/// The system field (float32, one value per sample) that carries each
/// sample's dataset loss weight, with [`MultiReader::with_loss_weights`](crate::MultiReader::with_loss_weights).
pub const LOSS_WEIGHT: &str = "loss_weight";

impl MultiReaderOptions {
    /// Sets `output_strict`. Off, children may have different fields: the
    /// mixture has the union of them. A sample of a child that lacks a
    /// field reads it as absent: NaN for floats, an integer type's extreme,
    /// false ([`crate::data::absent`]); a child without `cell`, `pbc` or
    /// `shifts` reads zeros (false), no periodic image. Each label a sample
    /// may lack (a field some child lacks, or stores a `<name>_present`
    /// flag for) gets a system field `<name>_present` (bool, one per graph),
    /// false wherever the graph lacks the label, including a float label
    /// with a NaN in the graph's rows. `positions` and `atomic_numbers` are
    /// required of every child, and a field must have one level, element
    /// type and row shape across them.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::sync::Arc;
    /// use atomzarr::{AtomicData, InMemoryReader, MultiReader, MultiReaderOptions, Reader, ReaderExt};
    /// let bulk = AtomicData::new(vec![29], vec![[0.0; 3]])?.with_energy(-3.5).with_stress([[0.1; 3]; 3]);
    /// let molecule = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.7, 0.0, 0.0]])?.with_energy(-1.0);
    /// let a = InMemoryReader::from_samples(&[bulk], "bulk")?;
    /// let b = InMemoryReader::from_samples(&[molecule], "molecules")?;
    /// let opts = MultiReaderOptions::default().with_output_strict(false);
    /// let multi = MultiReader::with_options(vec![Arc::new(a), Arc::new(b)], opts)?;
    /// let mut out = Vec::new();
    /// multi.read_collated(&[vec![0, 1]], &mut out)?;
    /// let flags = &out[0].fields["stress_present"].data;
    /// assert_eq!(flags, &atomzarr::HostData::Bool(vec![true, false]));
    /// assert!(out[0].fields["stress"].data.get_f64(9).unwrap().is_nan()); // the molecule's
    /// assert!(!multi.schema().fields.contains_key("energy_present")); // both have energy
    /// # Ok(()) }
    /// ```
    pub fn with_output_strict(mut self, yes: bool) -> Self {
        self.output_strict = yes;
        self
    }
    /// Whether children must share field names and levels.
    pub fn output_strict(&self) -> bool {
        self.output_strict
    }
    /// Every sample and batch carries the system field [`DATASET_INDEX`]
    /// (int64): the position of the child it came from, for per-dataset
    /// losses, weights and metrics (default off, so samples equal their
    /// children's). A child that has a field of that name is refused.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::sync::Arc;
    /// use atomzarr::{InMemoryReader, MultiReader, MultiReaderOptions, Reader, ReaderExt};
    /// let a = InMemoryReader::from_samples(&atomzarr::data::synth::generate(2, 2, 4, 1)?, "a")?;
    /// let b = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 4, 2)?, "b")?;
    /// let opts = MultiReaderOptions::default().with_dataset_index(true);
    /// let multi = MultiReader::with_options(vec![Arc::new(a), Arc::new(b)], opts)?;
    /// let mut out = Vec::new();
    /// multi.read_collated(&[vec![4, 0, 2]], &mut out)?;
    /// assert_eq!(out[0].fields["dataset_index"].data.to_i64_vec(), Some(vec![1, 0, 1]));
    /// assert_eq!(multi.read(1)?.data.field("dataset_index").unwrap().data.to_i64_vec(), Some(vec![0]));
    /// # Ok(()) }
    /// ```
    pub fn with_dataset_index(mut self, yes: bool) -> Self {
        self.dataset_index = yes;
        self
    }
    /// Whether samples carry [`DATASET_INDEX`].
    pub fn dataset_index(&self) -> bool {
        self.dataset_index
    }

    /// The decoded-chunk budget the children share, in bytes (default
    /// [`DEFAULT_CACHE_BYTES`], one reader's default): the mixture holds one
    /// cache's worth per process, however many stores it mixes. It is split
    /// by what each child needs ([`split_cache_budget`](crate::source::split_cache_budget):
    /// room for each child's resident arrays first, then equal parts, a
    /// child taking no more than it needs to be cached whole) and each
    /// child's own budget is set to its share, replacing the budget it was
    /// opened with. A [`DataLoader`](crate::DataLoader) with a mixing
    /// sampler splits it anew by how many times over its epoch draws each
    /// child ([`split_cache_budget_by_passes`](crate::source::split_cache_budget_by_passes)):
    /// a child drawn several times over that fits is cached whole, decoded
    /// once rather than once per pass. A shuffled mixture sizes each
    /// child's block pool from its share.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::sync::Arc;
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, MultiReader, MultiReaderOptions, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let mut children: Vec<Arc<dyn atomzarr::Reader>> = Vec::new();
    /// for (k, n) in [(0, 40), (1, 400)] {
    ///     let path = dir.path().join(format!("s{k}.zarr"));
    ///     AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&atomzarr::data::synth::generate(n, 2, 8, k)?)?;
    ///     children.push(Arc::new(AtomicDataZarrReader::open(&path)?));
    /// }
    /// let multi = MultiReader::with_options(children, MultiReaderOptions::default().with_cache_bytes(100_000))?;
    /// let fits = atomzarr::ReaderExt::chunked(&multi).unwrap().part_fits();
    /// assert_eq!(fits.iter().map(|f| f.cache_bytes).sum::<u64>(), 100_000);
    /// assert!(fits[0].fits() && !fits[1].fits()); // the small store is cached whole
    /// # Ok(()) }
    /// ```
    pub fn with_cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// The decoded-chunk budget the children share.
    pub fn cache_bytes(&self) -> u64 {
        self.cache_bytes
    }
}
