//! Rotations in 3-d: [`Rotation`], a proper orthogonal matrix, drawn
//! uniformly (Haar measure on SO(3)) from three uniforms, and applied to
//! vectors (`v' = R v`) and rank-2 tensors (`S' = R S Rᵀ`).
//!
//! The draw is Shoemake's ("Uniform random rotations", Graphics Gems III,
//! 1992): with `u1, u2, u3` uniform in `[0, 1)`, the unit quaternion
//! `(w, x, y, z) = (√u1 cos 2πu3, √(1-u1) sin 2πu2, √(1-u1) cos 2πu2, √u1 sin 2πu3)`
//! is uniform on the 3-sphere, so its rotation is uniform on SO(3).
//! [`Rotation::for_sample`] takes the uniforms from
//! [`sample_uniforms`](crate::data::hash::sample_uniforms)`(seed, epoch, index)`.
//!
//! ```
//! use atomzarr::data::rotation::Rotation;
//! let r = Rotation::for_sample(0, 1, 42);
//! let (a, b) = ([1.0, 2.0, 3.0], [-0.5, 0.0, 2.0]);
//! let dot = |p: [f64; 3], q: [f64; 3]| p[0] * q[0] + p[1] * q[1] + p[2] * q[2];
//! assert!((dot(r.apply(a), r.apply(b)) - dot(a, b)).abs() < 1e-12); // lengths and angles kept
//! assert!((r.determinant() - 1.0).abs() < 1e-12); // proper: no reflection
//! ```

/// A 3x3 rotation matrix (row-major), acting on column vectors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rotation {
    m: [[f64; 3]; 3],
}

impl Rotation {
    /// The identity.
    pub const IDENTITY: Rotation = Rotation { m: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]] };

    /// The rotation of three uniforms in `[0, 1)` (Shoemake's method; see the
    /// module docs).
    pub fn from_uniforms(u: [f64; 3]) -> Rotation {
        use std::f64::consts::TAU;
        let (r1, r2) = ((1.0 - u[0]).sqrt(), u[0].sqrt());
        let (t1, t2) = (TAU * u[1], TAU * u[2]);
        let (x, y, z, w) = (r1 * t1.sin(), r1 * t1.cos(), r2 * t2.sin(), r2 * t2.cos());
        Rotation {
            m: [
                [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)],
                [2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x)],
                [2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)],
            ],
        }
    }

    /// The rotation of sample `index` in `epoch` under `seed`: the same
    /// triple always gives the same rotation, on every machine.
    pub fn for_sample(seed: u64, epoch: u64, index: u64) -> Rotation {
        Rotation::from_uniforms(crate::data::hash::sample_uniforms(seed, epoch, index))
    }

    /// The matrix, row-major.
    pub fn matrix(&self) -> [[f64; 3]; 3] {
        self.m
    }

    /// `R v`.
    pub fn apply(&self, v: [f64; 3]) -> [f64; 3] {
        let m = &self.m;
        [0, 1, 2].map(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
    }

    /// `R S Rᵀ` of a 3x3 tensor `s` (row-major).
    pub fn apply_tensor(&self, s: [[f64; 3]; 3]) -> [[f64; 3]; 3] {
        let m = &self.m;
        // (R S)_ik, then (R S Rᵀ)_ij = sum_k (R S)_ik R_jk.
        let rs = [0, 1, 2].map(|i| [0, 1, 2].map(|k| (0..3).map(|l| m[i][l] * s[l][k]).sum::<f64>()));
        [0, 1, 2].map(|i| [0, 1, 2].map(|j| (0..3).map(|k| rs[i][k] * m[j][k]).sum::<f64>()))
    }

    /// The determinant (1 for a proper rotation, up to rounding).
    pub fn determinant(&self) -> f64 {
        let m = &self.m;
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    /// Rotates, in place, every 3-vector in `row` (a row of `3k` values,
    /// `k` vectors one after another).
    pub fn apply_in_place(&self, row: &mut [f64]) {
        for v in row.chunks_exact_mut(3) {
            let r = self.apply([v[0], v[1], v[2]]);
            v.copy_from_slice(&r);
        }
    }

    /// Rotates, in place, a row of 9 values holding a 3x3 tensor (row-major).
    pub fn apply_tensor_in_place(&self, row: &mut [f64]) {
        if let Ok(s) = <&[f64; 9]>::try_from(&*row) {
            let s = [[s[0], s[1], s[2]], [s[3], s[4], s[5]], [s[6], s[7], s[8]]];
            let t = self.apply_tensor(s);
            row.copy_from_slice(&[t[0][0], t[0][1], t[0][2], t[1][0], t[1][1], t[1][2], t[2][0], t[2][1], t[2][2]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_orthonormal_and_uniform_in_the_mean() {
        // Under the Haar measure E[R] = 0 and E[R_ij^2] = 1/3 for every entry.
        let n = 20_000;
        let (mut mean, mut sq) = ([[0.0f64; 3]; 3], [[0.0f64; 3]; 3]);
        for i in 0..n {
            let r = Rotation::for_sample(3, 0, i);
            let m = r.matrix();
            for a in 0..3 {
                for b in 0..3 {
                    let dot: f64 = (0..3).map(|k| m[a][k] * m[b][k]).sum();
                    assert!((dot - f64::from(u8::from(a == b))).abs() < 1e-12);
                    mean[a][b] += m[a][b] / n as f64;
                    sq[a][b] += m[a][b] * m[a][b] / n as f64;
                }
            }
            assert!((r.determinant() - 1.0).abs() < 1e-12);
        }
        // Standard errors: sqrt(1/3 / n) = 0.004 for the mean, ~0.002 for the square.
        for a in 0..3 {
            for b in 0..3 {
                assert!(mean[a][b].abs() < 0.02, "E[R_{a}{b}] = {}", mean[a][b]);
                assert!((sq[a][b] - 1.0 / 3.0).abs() < 0.01, "E[R_{a}{b}^2] = {}", sq[a][b]);
            }
        }
    }

    #[test]
    fn tensor_rule_is_r_s_rt() {
        let r = Rotation::for_sample(1, 2, 3);
        // S = a bᵀ rotates to (R a)(R b)ᵀ.
        let (a, b) = ([1.0, -2.0, 0.5], [0.3, 0.7, -1.1]);
        let s = [0, 1, 2].map(|i| [0, 1, 2].map(|j| a[i] * b[j]));
        let (ra, rb) = (r.apply(a), r.apply(b));
        let t = r.apply_tensor(s);
        for i in 0..3 {
            for j in 0..3 {
                assert!((t[i][j] - ra[i] * rb[j]).abs() < 1e-12);
            }
        }
    }
}
