//! Units: a store holds eV, Å, eV/Å (forces) and eV/Å³ (stress); each
//! source format states its own ([`Units`]), and the parsers convert while
//! they read (in f64, before the float32 cast).
//!
//! The constants are CODATA 2014 evaluated as `ase.units` evaluates them
//! (same formulas, same order), so a value converted here equals ASE's
//! conversion of it (`cli/tests/import_formats.rs` checks every factor against
//! `ase.units`).
//!
//! ```
//! use atomzarr::formats::units::{Energy, Length, Units};
//! let spice = Units { energy: Energy::Hartree, length: Length::Bohr, ..Units::default() };
//! let f = spice.factors();
//! assert!((f.energy - 27.211386024367243).abs() < 1e-12);
//! assert!((f.length - 0.5291772105638411).abs() < 1e-15);
//! assert!((f.forces - f.energy / f.length).abs() < 1e-12);
//! assert_eq!("energy=kcal/mol,length=Å".parse::<Units>().unwrap().energy, Energy::KcalPerMol);
//! ```

use std::f64::consts::PI;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// CODATA 2014, as `ase.units` (its default) holds it.
mod codata {
    pub const C: f64 = 299_792_458.;
    pub const HPLANCK: f64 = 6.626_070_040e-34;
    pub const E: f64 = 1.602_176_620_8e-19;
    pub const ME: f64 = 9.109_383_56e-31;
    pub const NAV: f64 = 6.022_140_857e23;
}

fn mu0() -> f64 {
    4.0e-7 * PI
}
fn eps0() -> f64 {
    1.0 / mu0() / codata::C.powf(2.0)
}
fn hbar() -> f64 {
    codata::HPLANCK / (2.0 * PI)
}

/// Bohr radius in Å (`ase.units.Bohr`).
pub fn bohr() -> f64 {
    4e10 * PI * eps0() * hbar().powf(2.0) / codata::ME / codata::E.powf(2.0)
}

/// Hartree in eV (`ase.units.Hartree`).
pub fn hartree() -> f64 {
    codata::ME * codata::E.powf(3.0) / 16.0 / PI.powf(2.0) / eps0().powf(2.0) / hbar().powf(2.0)
}

/// kJ in eV (`ase.units.kJ`).
pub fn kj() -> f64 {
    1000.0 / codata::E
}

/// kcal in eV (`ase.units.kcal`).
pub fn kcal() -> f64 {
    4.184 * kj()
}

/// Avogadro's number (`ase.units.mol`).
pub fn mol() -> f64 {
    codata::NAV
}

/// GPa in eV/Å³ (`ase.units.GPa`).
pub fn gpa() -> f64 {
    1e9 * ((1.0 / codata::E) / 1e30)
}

/// bar in eV/Å³ (`ase.units.bar`).
pub fn bar() -> f64 {
    1e5 * ((1.0 / codata::E) / 1e30)
}

/// An energy unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Energy {
    /// eV (the store's).
    #[serde(rename = "eV")]
    EV,
    /// Hartree.
    #[serde(rename = "hartree")]
    Hartree,
    /// kcal/mol.
    #[serde(rename = "kcal/mol")]
    KcalPerMol,
    /// kJ/mol.
    #[serde(rename = "kJ/mol")]
    KjPerMol,
    /// Rydberg.
    #[serde(rename = "Ry")]
    Rydberg,
}

impl Energy {
    /// eV per unit.
    pub fn in_ev(self) -> f64 {
        match self {
            Energy::EV => 1.0,
            Energy::Hartree => hartree(),
            Energy::KcalPerMol => kcal() / mol(),
            Energy::KjPerMol => kj() / mol(),
            Energy::Rydberg => 0.5 * hartree(),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Energy::EV => "eV",
            Energy::Hartree => "hartree",
            Energy::KcalPerMol => "kcal/mol",
            Energy::KjPerMol => "kJ/mol",
            Energy::Rydberg => "Ry",
        }
    }
}

/// A length unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Length {
    /// Ångström (the store's).
    #[serde(rename = "Å")]
    Angstrom,
    /// Bohr.
    #[serde(rename = "bohr")]
    Bohr,
    /// Nanometre.
    #[serde(rename = "nm")]
    Nm,
}

impl Length {
    /// Å per unit.
    pub fn in_angstrom(self) -> f64 {
        match self {
            Length::Angstrom => 1.0,
            Length::Bohr => bohr(),
            Length::Nm => 10.0,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Length::Angstrom => "Å",
            Length::Bohr => "bohr",
            Length::Nm => "nm",
        }
    }
}

/// A stress (pressure) unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Stress {
    /// The energy unit over the length unit cubed (eV/Å³ for eV and Å).
    #[serde(rename = "energy/length^3")]
    EnergyPerVolume,
    /// GPa.
    #[serde(rename = "GPa")]
    Gpa,
    /// kBar (VASP's).
    #[serde(rename = "kBar")]
    Kbar,
}

/// The units of a source: the store converts them to eV, Å, eV/Å, eV/Å³.
/// Forces are in the energy unit per length unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Units {
    /// Energies.
    pub energy: Energy,
    /// Positions and cells.
    pub length: Length,
    /// Stresses.
    pub stress: Stress,
}

impl Default for Units {
    /// eV, Å, eV/Å³: ASE's units, and the store's.
    fn default() -> Self {
        Units { energy: Energy::EV, length: Length::Angstrom, stress: Stress::EnergyPerVolume }
    }
}

/// Multipliers from a source's units to the store's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Factors {
    /// Energies to eV.
    pub energy: f64,
    /// Lengths to Å.
    pub length: f64,
    /// Forces to eV/Å.
    pub forces: f64,
    /// Stresses to eV/Å³.
    pub stress: f64,
}

impl Factors {
    /// Whether every factor is 1 (nothing to convert).
    pub fn is_identity(&self) -> bool {
        [self.energy, self.length, self.forces, self.stress].iter().all(|&f| f == 1.0)
    }
}

impl Units {
    /// The multipliers to eV, Å, eV/Å and eV/Å³.
    pub fn factors(&self) -> Factors {
        let e = self.energy.in_ev();
        let l = self.length.in_angstrom();
        Factors {
            energy: e,
            length: l,
            forces: if l == 1.0 { e } else { e / l },
            stress: match self.stress {
                Stress::EnergyPerVolume if l == 1.0 => e,
                Stress::EnergyPerVolume => e / l.powf(3.0),
                Stress::Gpa => gpa(),
                Stress::Kbar => 0.1 * gpa(),
            },
        }
    }

    /// `energy=hartree,length=bohr` style, for the record in the store.
    pub fn describe(&self) -> String {
        let stress = match self.stress {
            Stress::EnergyPerVolume => format!("{}/{}^3", self.energy.name(), self.length.name()),
            Stress::Gpa => "GPa".into(),
            Stress::Kbar => "kBar".into(),
        };
        format!(
            "energy={},length={},forces={}/{},stress={stress}",
            self.energy.name(),
            self.length.name(),
            self.energy.name(),
            self.length.name()
        )
    }
}

impl fmt::Display for Units {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl FromStr for Units {
    type Err = String;

    /// `key=unit` pairs separated by commas, over eV/Å defaults: `energy`
    /// (`eV`, `hartree`, `kcal/mol`, `kJ/mol`, `Ry`), `length` (`Å`/`A`/`Ang`,
    /// `bohr`, `nm`), `stress` (`GPa`, `kbar`, or the energy over length
    /// cubed, the default).
    fn from_str(s: &str) -> Result<Units, String> {
        let mut u = Units::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| format!("`{part}`: expected key=unit (energy=hartree)"))?;
            let v = value.trim().to_lowercase();
            match key.trim() {
                "energy" => {
                    u.energy = match v.as_str() {
                        "ev" => Energy::EV,
                        "hartree" | "ha" | "eh" => Energy::Hartree,
                        "kcal/mol" => Energy::KcalPerMol,
                        "kj/mol" => Energy::KjPerMol,
                        "ry" | "rydberg" => Energy::Rydberg,
                        _ => return Err(format!("energy unit `{value}`: one of eV, hartree, kcal/mol, kJ/mol, Ry")),
                    }
                }
                "length" => {
                    u.length = match v.as_str() {
                        "å" | "a" | "ang" | "angstrom" => Length::Angstrom,
                        "bohr" | "a0" => Length::Bohr,
                        "nm" => Length::Nm,
                        _ => return Err(format!("length unit `{value}`: one of Å (A), bohr, nm")),
                    }
                }
                "stress" => {
                    u.stress = match v.as_str() {
                        "gpa" => Stress::Gpa,
                        "kbar" => Stress::Kbar,
                        "energy/length^3" | "ev/å^3" | "ev/a^3" => Stress::EnergyPerVolume,
                        _ => return Err(format!("stress unit `{value}`: one of GPa, kbar, energy/length^3")),
                    }
                }
                other => return Err(format!("unknown unit key `{other}` (energy, length, stress)")),
            }
        }
        Ok(u)
    }
}

/// `v` scaled by `factor` and rounded to float32 (one rounding: the
/// product is taken in f64).
#[inline]
pub fn scale_f32(v: f64, factor: f64) -> f32 {
    if factor == 1.0 { v as f32 } else { (v * factor) as f32 }
}
