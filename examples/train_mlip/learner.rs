//! `--learner`: the same potential trained by burn-train 0.21's
//! `SupervisedTraining` / `Learner`, with atomzarr's `DataLoader` passed to
//! it as `Arc<dyn DataLoader<...>>` for training and validation.
//!
//! `--num-nodes N --node-rank R --global-address HOST:PORT --node-port P`:
//! one of N data-parallel nodes. burn-train's DDP strategy needs a
//! `DistributedBackend` (CubeCL backends), which the CPU backend Flex is
//! not, and it synchronises the devices of one process; across processes
//! burn 0.21 offers burn-collective. So the nodes run burn-train with a
//! custom learning strategy ([`CollectiveStrategy`]) that all-reduces every
//! step's gradients across nodes ([`all_reduce_fused`], mean) before the
//! optimizer step. Each node's train loader reads its rank's share of
//! every epoch (`DataLoaderBuilder::with_rank`); rank 0 also runs the global
//! orchestrator (`burn_collective::start_global_orchestrator`) on a thread.
#![allow(dead_code)]

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atomzarr::AtomicBatch;
use burn::collective::{
    AllReduceStrategy, CollectiveConfig, PeerId, ReduceOperation, all_reduce, finish_collective, register,
};
use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderIterator, Progress};
use burn::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::optim::{AdamConfig, GradientsParams};
use burn::record::CompactRecorder;
use burn::tensor::backend::{AutodiffBackend, Backend, DeviceOps};
use burn::tensor::{Device, Tensor, TensorPrimitive, Transaction};
use burn::train::metric::state::{FormatOptions, NumericMetricState};
use burn::train::metric::{
    Adaptor, ItemLazy, LossInput, LossMetric, Metric, MetricAttributes, MetricMetadata, MetricName, Numeric,
    NumericAttributes, NumericEntry, SerializedEntry,
};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn::train::{
    EventProcessorTraining, InferenceStep, Learner, LearnerEvent, LearningComponentsTypes, SupervisedLearningStrategy,
    SupervisedTraining, SupervisedTrainingEventProcessor, TrainLoader, TrainOutput, TrainStep, TrainingBackend,
    TrainingComponents, TrainingItem, TrainingModel, TrainingStrategy, ValidLoader,
};

use crate::model::{GraphBatch, Mlip, MlipConfig, Prediction, loss};
use crate::training::BoxError;

/// The potential as burn-train trains it: the model and its loss constants.
#[derive(Module, Debug)]
pub struct Potential<B: Backend> {
    /// The model.
    pub mlip: Mlip<B>,
    energy_weight: f64,
}

impl<B: Backend> Potential<B> {
    /// A fresh potential.
    pub fn new(config: &MlipConfig, energy_weight: f64, device: &B::Device) -> Self {
        Potential { mlip: config.init(device), energy_weight }
    }

    /// The potential with its gathers and sums in form `scatter`.
    pub fn with_scatter(mut self, scatter: crate::model::Scatter) -> Self {
        self.mlip = self.mlip.with_scatter(scatter);
        self
    }

    fn output(&self, batch: AtomicBatch<B>) -> (StepOutput<B>, Tensor<B, 1>) {
        // burn-train's steps cannot return errors; the loader already
        // validated the sample, so a failure here is a bug worth stopping on.
        let batch = GraphBatch::from_atomic(batch).unwrap_or_else(|e| panic!("train_mlip: bad batch: {e}"));
        let pred: Prediction<B> = self.mlip.forward(&batch);
        let weights = crate::model::LossWeights { energy: self.energy_weight, force: 1.0 };
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

impl<B: AutodiffBackend> TrainStep for Potential<B> {
    type Input = AtomicBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: AtomicBatch<B>) -> TrainOutput<StepOutput<B>> {
        let (out, l) = self.output(batch);
        TrainOutput::new(self, l.backward(), out)
    }
}

impl<B: Backend> InferenceStep for Potential<B> {
    type Input = AtomicBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: AtomicBatch<B>) -> StepOutput<B> {
        self.output(batch).0
    }
}

/// What a step reports to the metrics (on the step's device).
pub struct StepOutput<B: Backend> {
    loss: Tensor<B, 1>,
    energy_abs: Tensor<B, 1>,
    force_abs: Tensor<B, 1>,
    graphs: usize,
    components: usize,
}

/// A step's report on the host.
pub struct StepReport {
    loss: Tensor<burn::backend::Flex, 1>,
    energy_abs: f64,
    force_abs: f64,
    graphs: usize,
    components: usize,
}

impl<B: Backend> ItemLazy for StepOutput<B> {
    type ItemSync = StepReport;

    fn sync(self) -> StepReport {
        let datas =
            Transaction::default().register(self.loss).register(self.energy_abs).register(self.force_abs).execute();
        let scalar = |i: usize| -> f64 { datas[i].iter::<f64>().next().unwrap_or(f64::NAN) };
        StepReport {
            loss: Tensor::from_data(datas[0].clone(), &Default::default()),
            energy_abs: scalar(1),
            force_abs: scalar(2),
            graphs: self.graphs,
            components: self.components,
        }
    }
}

impl Adaptor<LossInput<burn::backend::Flex>> for StepReport {
    fn adapt(&self) -> LossInput<burn::backend::Flex> {
        LossInput::new(self.loss.clone())
    }
}

/// Input of the MAE metrics: a sum of absolute errors over `count` values.
pub struct MaeInput {
    sum: f64,
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

impl Adaptor<EnergyErr> for StepReport {
    fn adapt(&self) -> EnergyErr {
        EnergyErr(MaeInput { sum: self.energy_abs, count: self.graphs })
    }
}
impl Adaptor<ForceErr> for StepReport {
    fn adapt(&self) -> ForceErr {
        ForceErr(MaeInput { sum: self.force_abs, count: self.components })
    }
}

#[derive(Clone, Default)]
pub struct MaeState {
    state: NumericMetricState,
}

impl MaeState {
    fn update(&mut self, name: MetricName, x: &MaeInput) -> SerializedEntry {
        // NumericMetricState averages the per-batch values weighted by `count`,
        // which makes the epoch value the MAE over all values.
        let mae = x.sum / x.count.max(1) as f64;
        self.state.update(mae, x.count.max(1), FormatOptions::new(name).precision(5))
    }
}

macro_rules! mae_metric {
    ($t:ident, $input:ident, $name:expr, $unit:expr) => {
        impl Metric for $t {
            type Input = $input;
            fn name(&self) -> MetricName {
                Arc::new($name.to_string())
            }
            fn update(&mut self, item: &$input, _m: &MetricMetadata) -> SerializedEntry {
                let name = self.name();
                self.0.update(name, &item.0)
            }
            fn clear(&mut self) {
                self.0.state.reset()
            }
            fn attributes(&self) -> MetricAttributes {
                NumericAttributes { unit: Some($unit.into()), higher_is_better: false }.into()
            }
        }
        impl Numeric for $t {
            fn value(&self) -> NumericEntry {
                self.0.state.current_value()
            }
            fn running_value(&self) -> NumericEntry {
                self.0.state.running_value()
            }
        }
    };
}
mae_metric!(EnergyMae, EnergyErr, "Energy MAE", "eV");
mae_metric!(ForceMae, ForceErr, "Force MAE", "eV/Å");

/// What the timed loaders saw: samples, and per epoch the time blocked in
/// the loader and the epoch's wall time.
#[derive(Debug, Default)]
pub struct LoaderTimes {
    /// Samples yielded over all epochs.
    pub samples: usize,
    /// (wait, total) per epoch.
    pub epochs: Vec<(Duration, Duration)>,
}

impl LoaderTimes {
    /// Share of the epochs' time spent waiting for data, leaving out the
    /// first epoch (warm-up) when there are more, as the custom loop does.
    pub fn wait_fraction(&self) -> f64 {
        let e = if self.epochs.len() > 1 { &self.epochs[1..] } else { &self.epochs[..] };
        let (w, t) = e.iter().fold((0.0, 0.0), |(w, t), (a, b)| (w + a.as_secs_f64(), t + b.as_secs_f64()));
        w / t.max(1e-9)
    }
}

/// burn-train exposes no data-wait figure, so the train loader is wrapped:
/// every `next()` is timed, and so is each epoch from `iter()` to the
/// iterator's end. The batches are atomzarr's, untouched.
pub struct Timed<B: Backend> {
    inner: Arc<dyn BurnDataLoader<B, AtomicBatch<B>>>,
    times: Arc<Mutex<LoaderTimes>>,
}

impl<B: Backend> Timed<B> {
    /// Wraps `inner`; the times go to `times`.
    pub fn new(inner: Arc<dyn BurnDataLoader<B, AtomicBatch<B>>>, times: Arc<Mutex<LoaderTimes>>) -> Self {
        Timed { inner, times }
    }
}

struct TimedIter<'a, B: Backend> {
    inner: Box<dyn DataLoaderIterator<AtomicBatch<B>> + 'a>,
    times: Arc<Mutex<LoaderTimes>>,
    start: Instant,
    wait: Duration,
    samples: usize,
}

impl<B: Backend> Iterator for TimedIter<'_, B> {
    type Item = AtomicBatch<B>;
    fn next(&mut self) -> Option<AtomicBatch<B>> {
        let t = Instant::now();
        let b = self.inner.next();
        self.wait += t.elapsed();
        if let Some(b) = &b {
            self.samples += b.num_graphs;
        }
        b
    }
}

impl<B: Backend> DataLoaderIterator<AtomicBatch<B>> for TimedIter<'_, B> {
    fn progress(&self) -> Progress {
        self.inner.progress()
    }
}

impl<B: Backend> Drop for TimedIter<'_, B> {
    fn drop(&mut self) {
        let mut t = self.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.samples += self.samples;
        t.epochs.push((self.wait, self.start.elapsed()));
    }
}

impl<B: Backend> BurnDataLoader<B, AtomicBatch<B>> for Timed<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<AtomicBatch<B>> + 'a> {
        Box::new(TimedIter {
            inner: self.inner.iter(),
            times: self.times.clone(),
            start: Instant::now(),
            wait: Duration::ZERO,
            samples: 0,
        })
    }
    fn num_items(&self) -> usize {
        self.inner.num_items()
    }
    fn to_device(&self, device: &B::Device) -> Arc<dyn BurnDataLoader<B, AtomicBatch<B>>> {
        Arc::new(Timed { inner: self.inner.to_device(device), times: self.times.clone() })
    }
    fn slice(&self, start: usize, end: usize) -> Arc<dyn BurnDataLoader<B, AtomicBatch<B>>> {
        Arc::new(Timed { inner: self.inner.slice(start, end), times: self.times.clone() })
    }
}

/// A renderer that prints one line per epoch with each metric's epoch
/// mean (burn-train's CLI renderer without the `tui` feature prints every
/// item). burn-train hands a renderer each batch's value and count; the
/// epoch mean is their count-weighted average.
#[derive(Default)]
pub struct EpochLines {
    names: Vec<(burn::train::metric::MetricId, String)>,
    train: Vec<(String, f64, usize)>,
    valid: Vec<(String, f64, usize)>,
    epoch: usize,
}

fn record(names: &[(burn::train::metric::MetricId, String)], v: &mut Vec<(String, f64, usize)>, state: MetricState) {
    if let MetricState::Numeric(entry, value) = state {
        let Some((_, name)) = names.iter().find(|(id, _)| *id == entry.metric_id) else { return };
        let (x, n) = match value {
            NumericEntry::Value(x) => (x, 1),
            NumericEntry::Aggregated { aggregated_value, count } => (aggregated_value, count),
        };
        match v.iter_mut().find(|(m, _, _)| m == name) {
            Some(slot) => {
                slot.1 += x * n as f64;
                slot.2 += n;
            }
            None => v.push((name.clone(), x * n as f64, n)),
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
    fn render_train(&mut self, item: TrainingProgress, _p: Vec<ProgressType>) {
        self.epoch = item.global_progress.items_processed;
    }
    fn render_valid(&mut self, item: TrainingProgress, _p: Vec<ProgressType>) {
        if let Some(p) = item.progress
            && p.items_processed >= p.items_total
        {
            let fmt = |v: &[(String, f64, usize)]| {
                v.iter().map(|(m, s, n)| format!("{m} {:.5}", s / (*n).max(1) as f64)).collect::<Vec<_>>().join(", ")
            };
            println!("epoch {}: train [{}] | valid [{}]", self.epoch, fmt(&self.train), fmt(&self.valid));
            self.train.clear();
            self.valid.clear();
        }
    }
}

impl MetricsRendererEvaluation for EpochLines {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}
    fn render_test(&mut self, _item: EvaluationProgress, _p: Vec<ProgressType>) {}
}

impl MetricsRenderer for EpochLines {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, d: burn::train::metric::MetricDefinition) {
        self.names.push((d.metric_id, d.name));
    }
}

/// A hash of the parameters' values (CRC-32C of their f32 bytes, in the
/// module's visiting order): equal on two nodes only if every weight is.
pub fn params_checksum<B: Backend, M: Module<B>>(model: &M) -> String {
    struct V<B: Backend> {
        crc: u32,
        _b: PhantomData<B>,
    }
    impl<B: Backend> ModuleVisitor<B> for V<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let data = param.val().into_data().convert::<f32>();
            let bytes: Vec<u8> = data.iter::<f32>().flat_map(f32::to_le_bytes).collect();
            self.crc = crc32c::crc32c_append(self.crc, &bytes);
        }
    }
    let mut v = V::<B> { crc: 0, _b: PhantomData };
    model.visit(&mut v);
    format!("{:08x}", v.crc)
}

/// Where this process sits among the nodes.
#[derive(Debug, Clone)]
pub struct Nodes {
    /// Nodes in all.
    pub num_nodes: usize,
    /// This node's rank.
    pub rank: usize,
    /// `HOST:PORT` of the global orchestrator.
    pub global_address: String,
    /// `HOST` others reach this node at.
    pub node_host: String,
    /// Port of this node's tensor data service.
    pub node_port: u16,
}

impl Nodes {
    fn config(&self) -> Result<CollectiveConfig, BoxError> {
        let addr = |s: String| burn_communication::Address::from_str(&s).map_err(|e| format!("address {s}: {e}"));
        Ok(CollectiveConfig::default()
            .with_num_devices(1)
            .with_num_nodes(self.num_nodes as u32)
            .with_global_address(addr(format!("ws://{}", self.global_address))?)
            .with_node_address(addr(format!("ws://{}:{}", self.node_host, self.node_port))?)
            .with_data_service_port(self.node_port)
            .with_global_all_reduce_strategy(self.strategy()))
    }

    /// The global all-reduce: `ATOMZARR_ALL_REDUCE` = ring | tree | centralized (default).
    fn strategy(&self) -> AllReduceStrategy {
        match std::env::var("ATOMZARR_ALL_REDUCE").as_deref() {
            Ok("ring") => AllReduceStrategy::Ring,
            Ok("tree") => AllReduceStrategy::Tree(2),
            _ => AllReduceStrategy::Centralized,
        }
    }

    /// Starts the global orchestrator on this process (rank 0), on its own
    /// thread and runtime; it lives as long as the process.
    pub fn start_orchestrator(&self) -> Result<(), BoxError> {
        let port: u16 = self
            .global_address
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("--global-address {}: expected HOST:PORT", self.global_address))?;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        std::thread::Builder::new().name("collective-orchestrator".into()).spawn(move || {
            rt.block_on(burn::collective::start_global_orchestrator(port));
        })?;
        Ok(())
    }
}

/// burn-train's single-device loop with every step's gradients averaged
/// across the nodes by burn-collective before the optimizer step, so that
/// all nodes apply the same update and keep the same parameters.
pub struct CollectiveStrategy<LC: LearningComponentsTypes> {
    device: Device<TrainingBackend<LC>>,
    config: CollectiveConfig,
    data_port: u16,
}

type Inner<LC> = <TrainingBackend<LC> as AutodiffBackend>::InnerBackend;

impl<LC: LearningComponentsTypes> SupervisedLearningStrategy<LC> for CollectiveStrategy<LC> {
    fn fit(
        &self,
        components: TrainingComponents<LC>,
        mut learner: Learner<LC>,
        dataloader_train: TrainLoader<LC>,
        dataloader_valid: ValidLoader<LC>,
        starting_epoch: usize,
    ) -> (TrainingModel<LC>, SupervisedTrainingEventProcessor<LC>) {
        let peer = PeerId::from(0usize);
        let session = Session {
            peer,
            device: self.device.inner().clone(),
            config: self.config.clone(),
            data_port: self.data_port,
        };
        let dataloader_train = dataloader_train.to_device(&self.device);
        let dataloader_valid = dataloader_valid.to_device(self.device.inner());
        learner.fork(&self.device);
        let mut processor = components.event_processor;
        let mut checkpointer = components.checkpointer;
        let num_epochs = components.num_epochs;
        for epoch in starting_epoch..num_epochs + 1 {
            let mut it = dataloader_train.iter();
            let mut iteration = 0;
            while let Some(item) = it.next() {
                iteration += 1;
                learner.lr_step();
                let progress = it.progress();
                let out = learner.train_step(item);
                let grads = all_reduce_fused::<TrainingBackend<LC>, _>(&learner.model(), out.grads, &session);
                learner.optimizer_step(grads);
                let item = TrainingItem::new(
                    out.item,
                    progress,
                    Progress::new(epoch, num_epochs),
                    Some(iteration),
                    Some(learner.lr_current()),
                );
                processor.process_train(LearnerEvent::ProcessedItem(item));
            }
            drop(it);
            processor.process_train(LearnerEvent::EndEpoch(epoch));
            let model = learner.model().valid();
            let mut it = dataloader_valid.iter();
            let mut iteration = 0;
            while let Some(item) = it.next() {
                iteration += 1;
                let progress = it.progress();
                let item = TrainingItem::new(
                    model.step(item),
                    progress,
                    Progress::new(epoch, num_epochs),
                    Some(iteration),
                    None,
                );
                processor.process_valid(LearnerEvent::ProcessedItem(item));
            }
            processor.process_valid(LearnerEvent::EndEpoch(epoch));
            if let Some(c) = &mut checkpointer {
                c.checkpoint(&learner, epoch, &components.event_store);
            }
        }
        (learner.model(), processor)
    }
}

/// Averages a step's gradients across the nodes: every gradient flattened,
/// in the module's visiting order, into one tensor, all-reduced (mean) in a
/// collective session of its own, and cut back.
///
/// Why not `GradientsParams::all_reduce` in one session, as burn intends:
/// - it orders the gradients by sorted `ParamId` (burn-optim 0.21
///   `src/optim/grads.rs`: `ids.sort()`, "crucial, since the all-reduce
///   operations need to happen in the same order for the same parameters on
///   all nodes"), but a `ParamId` is a random u64 drawn in each process
///   (burn-std 0.21 `src/id.rs`, `IdGenerator::generate`: `gen_random()`),
///   so two processes pair different parameters:
///   `Global(PeerSentIncoherentTensor)`. The visiting order is the same on
///   every node.
/// - a second global all-reduce within one registration never completes
///   between two processes here (Ring, Tree and Centralized alike: both
///   nodes stop in their second download). burn's own multi-node tests
///   (burn-collective/multinode-tests) run one operation per registration.
///   `register` / `all_reduce` / `finish_collective` per step works.
pub fn all_reduce_fused<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    mut grads: GradientsParams,
    session: &Session<B::InnerBackend>,
) -> GradientsParams {
    let peer = session.peer;
    struct Take<'a, B: AutodiffBackend> {
        grads: &'a mut GradientsParams,
        flat: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Take<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let dims = param.val().dims();
            let g = self
                .grads
                .remove::<B::InnerBackend, D>(param.id)
                .unwrap_or_else(|| Tensor::zeros(dims, &param.val().inner().device()));
            self.flat.push(g.reshape([dims.iter().product::<usize>()]));
        }
    }
    struct Put<'a, B: AutodiffBackend> {
        grads: &'a mut GradientsParams,
        flat: Tensor<B::InnerBackend, 1>,
        at: usize,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Put<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let dims = param.val().dims();
            let n: usize = dims.iter().product();
            let g = self.flat.clone().narrow(0, self.at, n).reshape(dims);
            self.at += n;
            self.grads.register::<B::InnerBackend, D>(param.id, g);
        }
    }
    let mut take = Take::<B> { grads: &mut grads, flat: Vec::new() };
    model.visit(&mut take);
    let flat = Tensor::cat(take.flat, 0);
    // burn-train's strategies cannot return errors: a failed collective
    // stops this node with the collective's error.
    let fail = |what: &str, e| -> ! { panic!("train_mlip: burn-collective {what}: {e:?}") };
    wait_for_port(session.data_port, "free", port_free);
    register::<B::InnerBackend>(peer, session.device.clone(), session.config.clone())
        .unwrap_or_else(|e| fail("register", e));
    wait_for_port(session.data_port, "listening", port_listening);
    let reduced = all_reduce::<B::InnerBackend>(peer, flat.into_primitive().tensor(), ReduceOperation::Mean)
        .unwrap_or_else(|e| fail("all_reduce", e));
    finish_collective::<B::InnerBackend>(peer).unwrap_or_else(|e| fail("finish", e));
    let flat = Tensor::<B::InnerBackend, 1>::from_primitive(TensorPrimitive::Float(reduced));
    model.visit(&mut Put::<B> { grads: &mut grads, flat, at: 0 });
    grads
}

/// A node's collective session settings.
pub struct Session<B: Backend> {
    peer: PeerId,
    device: B::Device,
    config: CollectiveConfig,
    /// The port of this node's tensor data service.
    data_port: u16,
}

/// Waits, at most 10 s, until `ready` holds for this node's data port.
///
/// burn-collective 0.21 starts a node's data server anew at each
/// registration, as a task it does not wait for, and stops it at
/// `finish_collective` the same way (`global/node/base.rs`: `runtime.spawn`;
/// a failed bind is dropped with the task). On a loaded machine the next
/// registration could then try to bind while the last server still
/// listens, and a peer could download from a server not yet listening;
/// both end in `Failed to connect to data server`. So each step starts
/// only once the old server is gone and proceeds once the new one listens.
fn wait_for_port(port: u16, what: &str, ready: impl Fn(u16) -> bool) {
    let t0 = std::time::Instant::now();
    while !ready(port) {
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            panic!("train_mlip: the data service port {port} is not {what} after 10 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

fn port_listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// The options of a Learner run.
pub struct LearnerRun<'a> {
    /// Checkpoints and burn-train's logs.
    pub artifacts: PathBuf,
    /// Epochs.
    pub epochs: usize,
    /// Training batches per epoch (the schedule's length is per step).
    pub steps_per_epoch: usize,
    /// Peak learning rate (cosine decay to 5% over all steps).
    pub lr: f64,
    /// Weight of the energy term.
    pub energy_weight: f64,
    /// Resume from this Learner checkpoint (epoch).
    pub checkpoint: Option<usize>,
    /// Data-parallel nodes, if more than one.
    pub nodes: Option<Nodes>,
    /// The store (for messages).
    pub store: &'a Path,
}

/// What a Learner run returns: the trained model and the loader figures.
pub struct LearnerResult<B: Backend> {
    /// The trained model on the inner backend.
    pub model: Potential<B>,
    /// Train loader figures.
    pub times: LoaderTimes,
}

/// Trains `model` through burn-train on the two loaders.
pub fn fit<B: AutodiffBackend>(
    run: LearnerRun,
    model: Potential<B>,
    train: Arc<dyn BurnDataLoader<B, AtomicBatch<B>>>,
    valid: Arc<dyn BurnDataLoader<B::InnerBackend, AtomicBatch<B::InnerBackend>>>,
    device: &B::Device,
) -> Result<LearnerResult<B::InnerBackend>, BoxError> {
    let times = Arc::new(Mutex::new(LoaderTimes::default()));
    let timed: Arc<dyn BurnDataLoader<B, AtomicBatch<B>>> = Arc::new(Timed::new(train, times.clone()));
    let optim =
        AdamConfig::new().with_grad_clipping(Some(burn::grad_clipping::GradientClippingConfig::Norm(10.0))).init();
    let scheduler = CosineAnnealingLrSchedulerConfig::new(run.lr, (run.steps_per_epoch * run.epochs).max(1))
        .with_min_lr(run.lr * 0.05)
        .init()
        .map_err(|e| format!("learning-rate schedule: {e}"))?;
    let mut training = SupervisedTraining::new(&run.artifacts, timed, valid)
        .metrics((LossMetric::new(), EnergyMae::default(), ForceMae::default()))
        .with_file_checkpointer(CompactRecorder::new())
        .num_epochs(run.epochs)
        .renderer(EpochLines::default());
    if let Some(c) = run.checkpoint {
        training = training.checkpoint(c);
    }
    if let Some(nodes) = &run.nodes {
        let strategy =
            CollectiveStrategy { device: device.clone(), config: nodes.config()?, data_port: nodes.node_port };
        training = training.with_training_strategy(TrainingStrategy::Custom(Arc::new(strategy)));
    }
    let result = training.launch(Learner::new(model, optim, scheduler));
    let times = std::mem::take(&mut *times.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    Ok(LearnerResult { model: result.model, times })
}
