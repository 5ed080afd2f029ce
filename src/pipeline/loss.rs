//! Losses over labels that only some frames have: an absent float label is
//! NaN in the store (docs/LABELS.md), so a batch's `forces` or `stress`
//! holds NaN rows for frames without them. These helpers leave those
//! values out of a loss instead of letting one NaN spread to every gradient.
//!
//! ```
//! use burn::tensor::{Device, Tensor};
//! use atomzarr::pipeline::loss::{label_mask, masked_mse};
//! let dev = Device::flex();
//! let target = Tensor::<2>::from_floats([[1.0, 2.0], [f32::NAN, f32::NAN]], &dev);
//! let pred = Tensor::<2>::from_floats([[1.5, 2.0], [9.0, 9.0]], &dev);
//! assert_eq!(label_mask(&target).sum().into_scalar::<f32>(), 2.0);
//! assert_eq!(masked_mse(pred, target).into_scalar::<f32>(), 0.125); // (0.5² + 0²) / 2
//! ```

use burn::tensor::Tensor;

/// 1 where `target` holds a value, 0 where it is absent (NaN).
pub fn label_mask<const D: usize>(target: &Tensor<D>) -> Tensor<D> {
    target.clone().is_nan().bool_not().float()
}

/// `target` with its absent (NaN) values replaced by `value`.
pub fn fill_absent<const D: usize>(target: Tensor<D>, value: f32) -> Tensor<D> {
    let nan = target.clone().is_nan();
    target.mask_fill(nan, value)
}

/// Mean squared error over the values `target` holds (absent ones, NaN,
/// left out of both the sum and the count; 0 when none is present). The
/// gradient flows only through the present elements of `pred`.
pub fn masked_mse<const D: usize>(pred: Tensor<D>, target: Tensor<D>) -> Tensor<1> {
    let mask = label_mask(&target);
    let diff = (pred - fill_absent(target, 0.0)) * mask.clone();
    let count = mask.sum().clamp_min(1.0);
    (diff.clone() * diff).sum() / count
}
