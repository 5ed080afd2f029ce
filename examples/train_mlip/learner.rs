//! `--learner`: the same potential trained by burn-train's
//! `SupervisedTraining` / `Learner`, with atomzarr's `DataLoader` passed to
//! it as `Arc<dyn DataLoader<AtomicBatch>>` for training and validation.
//!
//! `--devices N`: N model replicas, data parallel in this process.
//! burn-train cuts every epoch of the train loader into N contiguous item
//! ranges, one per device (`split_dataloader`, through the loader's
//! `slice`), so each structure of an epoch is read once, by one device.
//! With [`Parallel::Ddp`] the replicas run Burn's distributed data parallel
//! (`ExecutionStrategy::ddp`): every backward all-reduces (mean) each
//! gradient across the devices before each replica's optimizer step. Burn
//! runs that all-reduce through the device runtime's collectives, which in
//! Burn 0.22 only CUDA has (NCCL); Flex is not a distributed backend and a
//! wgpu device has no transport between devices, so on those
//! [`Parallel::Multi`] runs burn-train's multi-device strategy instead
//! (`ExecutionStrategy::multi`): each device's gradients are moved to the
//! first device and summed there before one optimizer step.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atomzarr::AtomicBatch;
use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::AdamConfig;
use burn::tensor::distributed::{DistributedConfig, ReduceOperation};
use burn::tensor::{Device, ExecutionError, Tensor, TensorReadError};
use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::state::{FormatOptions, NumericMetricState};
use burn::train::metric::{
    Adaptor, ItemLazy, LossInput, LossMetric, Metric, MetricAttributes, MetricDefinition, MetricId, MetricMetadata,
    MetricName, Numeric, NumericAttributes, NumericEntry, SerializedEntry,
};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};
use burn::train::{
    ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim, SupervisedTraining, TrainOutput, TrainStep,
};

use crate::model::{GraphBatch, Mlip, MlipConfig, Prediction};
use crate::step::loss;
use crate::training::BoxError;

/// The potential as burn-train trains it: the model and its loss constants.
#[derive(Module, Debug)]
pub struct Potential {
    /// The model.
    pub mlip: Mlip,
    energy_weight: f64,
}

impl Potential {
    /// A fresh potential on `device`.
    pub fn new(config: &MlipConfig, energy_weight: f64, device: &Device) -> Self {
        Potential { mlip: config.init(device), energy_weight }
    }

    /// The potential with its gathers and sums in form `scatter`.
    pub fn with_scatter(mut self, scatter: crate::model::Scatter) -> Self {
        self.mlip = self.mlip.with_scatter(scatter);
        self
    }

    fn output(&self, batch: AtomicBatch) -> (StepOutput, Tensor<1>) {
        // burn-train's steps cannot return errors; the loader already
        // validated the sample, so a failure here is a bug worth stopping on.
        let batch = GraphBatch::from_atomic(batch).unwrap_or_else(|e| panic!("train_mlip: bad batch: {e}"));
        let pred: Prediction = self.mlip.forward(&batch);
        let weights = crate::step::LossWeights { energy: self.energy_weight, force: 1.0 };
        let l = loss(&self.mlip, &pred, &batch, weights);
        let out = StepOutput {
            loss: l.clone().detach(),
            energy_abs: (pred.energy.clone() - batch.energy.clone()).abs().sum().detach(),
            force_abs: (pred.forces.clone() - batch.forces.clone()).abs().sum().detach(),
            graphs: batch.num_graphs,
            components: batch.forces.dims()[0] * 3,
        };
        (out, l)
    }
}

impl TrainStep for Potential {
    type Input = AtomicBatch;
    type Output = StepOutput;

    fn step(&self, batch: AtomicBatch) -> TrainOutput<StepOutput> {
        let (out, l) = self.output(batch);
        TrainOutput::new(self, l.backward(), out)
    }
}

impl InferenceStep for Potential {
    type Input = AtomicBatch;
    type Output = StepOutput;

    fn step(&self, batch: AtomicBatch) -> StepOutput {
        self.output(batch).0
    }
}

/// What a step reports to the metrics: sums still on the step's device,
/// read back by the metrics on burn-train's metrics thread.
pub struct StepOutput {
    loss: Tensor<1>,
    energy_abs: Tensor<1>,
    force_abs: Tensor<1>,
    graphs: usize,
    components: usize,
}

impl ItemLazy for StepOutput {
    fn sync(self) -> Result<Self, ExecutionError> {
        // No read here: the metrics read their scalars. Flushing hands the
        // step's queued work to the device, and dropping autodiff keeps the
        // metrics thread off the training graph.
        self.loss.device().flush()?;
        Ok(StepOutput {
            loss: self.loss.without_autodiff(),
            energy_abs: self.energy_abs.without_autodiff(),
            force_abs: self.force_abs.without_autodiff(),
            graphs: self.graphs,
            components: self.components,
        })
    }
}

impl Adaptor<LossInput> for StepOutput {
    fn adapt(&self) -> LossInput {
        LossInput::new(self.loss.clone())
    }
}

/// Input of the MAE metrics: a sum of absolute errors over `count` values.
pub struct MaeInput {
    sum: Tensor<1>,
    count: usize,
}

/// Energy MAE (eV per structure).
#[derive(Clone, Default)]
pub struct EnergyMae(MaeState);
/// Force MAE (eV/Å per component).
#[derive(Clone, Default)]
pub struct ForceMae(MaeState);

/// Marker inputs so that one report feeds two metrics.
pub struct EnergyErr(MaeInput);
/// See [`EnergyErr`].
pub struct ForceErr(MaeInput);

impl Adaptor<EnergyErr> for StepOutput {
    fn adapt(&self) -> EnergyErr {
        EnergyErr(MaeInput { sum: self.energy_abs.clone(), count: self.graphs })
    }
}
impl Adaptor<ForceErr> for StepOutput {
    fn adapt(&self) -> ForceErr {
        ForceErr(MaeInput { sum: self.force_abs.clone(), count: self.components })
    }
}

#[derive(Clone, Default)]
pub struct MaeState {
    state: NumericMetricState,
}

fn mae_format(name: MetricName) -> FormatOptions {
    FormatOptions::new(name).precision(5)
}

impl MaeState {
    fn update(&mut self, name: MetricName, x: &MaeInput) -> Result<SerializedEntry, TensorReadError> {
        // NumericMetricState averages the per-batch values weighted by `count`,
        // which makes the epoch value the MAE over all values.
        let sum = x.sum.clone().try_into_scalar::<f64>()?;
        self.state.update(sum / x.count.max(1) as f64, x.count.max(1));
        Ok(self.state.compute_update(mae_format(name)))
    }
}

macro_rules! mae_metric {
    ($t:ident, $input:ident, $name:expr, $unit:expr) => {
        impl Metric for $t {
            type Input = $input;
            fn name(&self) -> MetricName {
                Arc::new($name.to_string())
            }
            fn update(&mut self, item: &$input, _m: &MetricMetadata) -> Result<SerializedEntry, TensorReadError> {
                let name = self.name();
                self.0.update(name, &item.0)
            }
            fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
                Ok(self.0.state.compute_final(mae_format(self.name())))
            }
            fn clear(&mut self) {
                self.0.state.reset()
            }
            fn attributes(&self) -> MetricAttributes {
                NumericAttributes { unit: Some($unit.into()), higher_is_better: false }.into()
            }
        }
        impl Numeric for $t {
            fn value(&self) -> Option<NumericEntry> {
                Some(self.0.state.current_value())
            }
            fn running_value(&self) -> Option<NumericEntry> {
                Some(self.0.state.running_value())
            }
            fn final_value(&self) -> NumericEntry {
                self.0.state.final_value()
            }
        }
    };
}
mae_metric!(EnergyMae, EnergyErr, "Energy MAE", "eV");
mae_metric!(ForceMae, ForceErr, "Force MAE", "eV/Å");

/// What the timed loaders saw: samples, per epoch (per device) the time
/// blocked in the loader and the epoch's wall time, and the samples each
/// epoch (per device) yielded.
#[derive(Debug, Default)]
pub struct LoaderTimes {
    /// Samples yielded over all epochs and devices.
    pub samples: usize,
    /// (wait, total) per epoch and device, in the order the epochs ended.
    pub epochs: Vec<(Duration, Duration)>,
    /// The sample indices each epoch of each device yielded, in the order
    /// the epochs ended: with N devices, entries `N·e..N·(e+1)` are epoch `e`.
    pub indices: Vec<Vec<usize>>,
    /// Devices that iterate at once (the first epoch of each is left out of
    /// [`wait_fraction`](Self::wait_fraction)).
    pub devices: usize,
}

impl LoaderTimes {
    /// Share of the epochs' time spent waiting for data, leaving out the
    /// first epoch (warm-up) when there are more, as the custom loop does.
    pub fn wait_fraction(&self) -> f64 {
        let first = self.devices.max(1);
        let e = if self.epochs.len() > first { &self.epochs[first..] } else { &self.epochs[..] };
        let (w, t) = e.iter().fold((0.0, 0.0), |(w, t), (a, b)| (w + a.as_secs_f64(), t + b.as_secs_f64()));
        w / t.max(1e-9)
    }
}

/// burn-train exposes no data-wait figure, so the train loader is wrapped:
/// every `next()` is timed, and so is each epoch from `iter()` to the
/// iterator's end. The batches are atomzarr's, untouched.
pub struct Timed {
    inner: Arc<dyn BurnDataLoader<AtomicBatch>>,
    times: Arc<Mutex<LoaderTimes>>,
}

impl Timed {
    /// Wraps `inner`; the times go to `times`.
    pub fn new(inner: Arc<dyn BurnDataLoader<AtomicBatch>>, times: Arc<Mutex<LoaderTimes>>) -> Self {
        Timed { inner, times }
    }
}

struct TimedIter<'a> {
    inner: Box<dyn DataLoaderIterator<AtomicBatch> + 'a>,
    times: Arc<Mutex<LoaderTimes>>,
    start: Instant,
    wait: Duration,
    indices: Vec<usize>,
}

impl Iterator for TimedIter<'_> {
    type Item = Result<AtomicBatch, DatasetError>;
    fn next(&mut self) -> Option<Self::Item> {
        let t = Instant::now();
        let b = self.inner.next();
        self.wait += t.elapsed();
        if let Some(Ok(b)) = &b {
            self.indices.extend_from_slice(&b.indices);
        }
        b
    }
}

impl DataLoaderIterator<AtomicBatch> for TimedIter<'_> {
    fn progress(&self) -> Progress {
        self.inner.progress()
    }
}

impl Drop for TimedIter<'_> {
    fn drop(&mut self) {
        let mut t = self.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.samples += self.indices.len();
        t.epochs.push((self.wait, self.start.elapsed()));
        t.indices.push(std::mem::take(&mut self.indices));
    }
}

impl BurnDataLoader<AtomicBatch> for Timed {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<AtomicBatch> + 'a> {
        Box::new(TimedIter {
            inner: self.inner.iter(),
            times: self.times.clone(),
            start: Instant::now(),
            wait: Duration::ZERO,
            indices: Vec::new(),
        })
    }
    fn num_items(&self) -> usize {
        self.inner.num_items()
    }
    fn to_device(&self, device: &Device) -> Arc<dyn BurnDataLoader<AtomicBatch>> {
        Arc::new(Timed { inner: self.inner.to_device(device), times: self.times.clone() })
    }
    fn slice(&self, start: usize, end: usize) -> Arc<dyn BurnDataLoader<AtomicBatch>> {
        Arc::new(Timed { inner: self.inner.slice(start, end), times: self.times.clone() })
    }
}

/// A renderer that prints one line per epoch with each metric's epoch
/// value (burn-train's CLI renderer without the `tui` feature prints every
/// item). At the end of each split burn-train hands a renderer every
/// metric's final value for the epoch; the line is printed when the epoch
/// ends, after validation.
#[derive(Default)]
pub struct EpochLines {
    names: Vec<(MetricId, String)>,
    train: Vec<(String, f64)>,
    valid: Vec<(String, f64)>,
}

fn record(names: &[(MetricId, String)], v: &mut Vec<(String, f64)>, state: MetricState) {
    if let MetricState::Numeric(entry, Some(NumericEntry::Final(x))) = state {
        let Some((_, name)) = names.iter().find(|(id, _)| *id == entry.metric_id) else { return };
        match v.iter_mut().find(|(m, _)| m == name) {
            Some(slot) => slot.1 = x,
            None => v.push((name.clone(), x)),
        }
    }
}

impl MetricsRendererTraining for EpochLines {
    fn update_train(&mut self, state: MetricState) {
        record(&self.names, &mut self.train, state);
    }
    fn update_valid(&mut self, state: MetricState) {
        record(&self.names, &mut self.valid, state);
    }
}

impl MetricsRendererEvaluation for EpochLines {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}
}

impl TrainingProgressLogger for EpochLines {
    fn start(&mut self, _total: usize, _starting: usize, _items: Option<usize>, _label: Option<&str>) {}
    fn update_epoch(&mut self, epoch: usize) {
        let fmt = |v: &[(String, f64)]| v.iter().map(|(m, x)| format!("{m} {x:.5}")).collect::<Vec<_>>().join(", ");
        println!("epoch {epoch}: train [{}] | valid [{}]", fmt(&self.train), fmt(&self.valid));
        self.train.clear();
        self.valid.clear();
    }
    fn start_split(&mut self, _split: &str, _total_items: usize) {}
    fn update_split(&mut self, _items_processed: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _event: String) {}
}

impl EvaluationProgressLogger for EpochLines {
    fn start_global_progress(&mut self, _total_tests: usize) {}
    fn start_test(&mut self, _name: &str, _total_items: usize) {}
    fn update_test_progress(&mut self, _items_processed: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _event: String) {}
}

impl MetricsRenderer for EpochLines {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, d: MetricDefinition) {
        self.names.push((d.metric_id, d.name.to_string()));
    }
}

/// A hash of the parameters' values (CRC-32C of their f32 bytes, in the
/// module's visiting order): equal for two models only if every weight is.
pub fn params_checksum<M: Module>(model: &M) -> String {
    struct V {
        crc: u32,
    }
    impl ModuleVisitor for V {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let data = param.val().into_data().convert::<f32>();
            let bytes: Vec<u8> = data.iter::<f32>().flat_map(f32::to_le_bytes).collect();
            self.crc = crc32c::crc32c_append(self.crc, &bytes);
        }
    }
    let mut v = V { crc: 0 };
    model.visit(&mut v);
    format!("{:08x}", v.crc)
}

/// How several devices train together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallel {
    /// Burn's distributed data parallel: a replica per device, gradients
    /// all-reduced (mean) between the devices after each backward. Burn
    /// 0.22 all-reduces only between CUDA devices (NCCL): DDP refuses Flex
    /// devices when it starts, and a wgpu device panics in the all-reduce.
    Ddp,
    /// burn-train's multi-device strategy: a replica per device, gradients
    /// summed on the first device, one optimizer step there. Any backend.
    Multi,
}

/// The options of a Learner run.
pub struct LearnerRun<'a> {
    /// Checkpoints and burn-train's logs.
    pub artifacts: PathBuf,
    /// Epochs.
    pub epochs: usize,
    /// Optimizer steps per epoch (the schedule's length is per step).
    pub steps_per_epoch: usize,
    /// Peak learning rate (cosine decay to 5% over all steps).
    pub lr: f64,
    /// Weight of the energy term.
    pub energy_weight: f64,
    /// Resume from this Learner checkpoint (epoch).
    pub checkpoint: Option<usize>,
    /// The training devices; more than one trains data parallel.
    pub devices: Vec<Device>,
    /// How several devices train together.
    pub parallel: Parallel,
    /// The store (for messages).
    pub store: &'a Path,
}

/// What a Learner run returns: the trained model and the loader figures.
pub struct LearnerResult {
    /// The trained model, without autodiff.
    pub model: Potential,
    /// Train loader figures.
    pub times: LoaderTimes,
}

/// Trains `model` through burn-train on the two loaders.
///
/// # Errors
/// A schedule burn-train refuses, no device, or the error burn-train
/// stopped on (a failed read, a failed step).
pub fn fit(
    run: LearnerRun,
    model: Potential,
    train: Arc<dyn BurnDataLoader<AtomicBatch>>,
    valid: Arc<dyn BurnDataLoader<AtomicBatch>>,
) -> Result<LearnerResult, BoxError> {
    let Some(main) = run.devices.first() else { return Err("the Learner needs a device".into()) };
    let times = Arc::new(Mutex::new(LoaderTimes { devices: run.devices.len(), ..LoaderTimes::default() }));
    let timed: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(Timed::new(train, times.clone()));
    let optim =
        AdamConfig::new().with_grad_clipping(Some(burn::grad_clipping::GradientClippingConfig::Norm(10.0))).init();
    let scheduler = CosineAnnealingLrSchedulerConfig::new(run.lr, (run.steps_per_epoch * run.epochs).max(1))
        .with_min_lr(run.lr * 0.05)
        .init()
        .map_err(|e| format!("learning-rate schedule: {e}"))?;
    let strategy = match (run.devices.len(), run.parallel) {
        (1, _) => ExecutionStrategy::single(main.clone()),
        (_, Parallel::Ddp) => {
            ExecutionStrategy::ddp(run.devices.clone(), DistributedConfig { all_reduce_op: ReduceOperation::Mean })
        }
        (_, Parallel::Multi) => ExecutionStrategy::multi(run.devices.clone(), MultiDeviceOptim::OptimMainDevice),
    };
    let mut training = SupervisedTraining::new(&run.artifacts, timed, valid)
        .metrics((LossMetric::new(), EnergyMae::default(), ForceMae::default()))
        .with_default_checkpointers()
        .num_epochs(run.epochs)
        .renderer(Box::new(EpochLines::default()))
        .with_training_strategy(strategy.into());
    if let Some(c) = run.checkpoint {
        training = training.checkpoint(c);
    }
    let result = training.launch(Learner::new(model, optim, scheduler));
    if let Some(e) = result.error {
        return Err(format!("burn-train stopped: {e}").into());
    }
    let times = std::mem::take(&mut *times.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    Ok(LearnerResult { model: result.model, times })
}
