//! Losses over labels that only some frames have: an absent float label is
//! NaN in the store (docs/LABELS.md), so a batch's `forces` or `stress`
//! holds NaN rows for frames without them. These helpers leave those
//! values out of a loss instead of letting one NaN spread to every gradient.
//!
//! ```
//! use burn::backend::Flex;
//! use burn::tensor::Tensor;
//! use atomzarr::pipeline::labels::{label_mask, masked_mse};
//! let dev = Default::default();
//! let target = Tensor::<Flex, 2>::from_floats([[1.0, 2.0], [f32::NAN, f32::NAN]], &dev);
//! let pred = Tensor::<Flex, 2>::from_floats([[1.5, 2.0], [9.0, 9.0]], &dev);
//! assert_eq!(label_mask(&target).sum().into_scalar(), 2.0);
//! assert_eq!(masked_mse(pred, target).into_scalar(), 0.125); // (0.5² + 0²) / 2
//! ```

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// 1 where `target` holds a value, 0 where it is absent (NaN).
pub fn label_mask<B: Backend, const D: usize>(target: &Tensor<B, D>) -> Tensor<B, D> {
    target.clone().is_nan().bool_not().float()
}

/// `target` with its absent (NaN) values replaced by `value`.
pub fn fill_absent<B: Backend, const D: usize>(target: Tensor<B, D>, value: f32) -> Tensor<B, D> {
    let nan = target.clone().is_nan();
    target.mask_fill(nan, value)
}

/// Mean squared error over the values `target` holds (absent ones, NaN,
/// left out of both the sum and the count; 0 when none is present). The
/// gradient flows only through the present elements of `pred`.
pub fn masked_mse<B: Backend, const D: usize>(pred: Tensor<B, D>, target: Tensor<B, D>) -> Tensor<B, 1> {
    let mask = label_mask(&target);
    let diff = (pred - fill_absent(target, 0.0)) * mask.clone();
    let count = mask.sum().clamp_min(1.0);
    (diff.clone() * diff).sum() / count
}
