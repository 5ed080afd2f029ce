//! The element types ([`DType`]) and axes ([`Level`]) of fields.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which axis a field lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// One row per atom.
    Atom,
    /// One row per edge (neighbor pair).
    Edge,
    /// One row per sample (structure).
    System,
}

impl Level {
    /// Of three per-axis values (atoms, edges, samples), the one of this
    /// level's axis: the single rule behind "how many rows" and "which
    /// rows" a field has (see also [`Pointers`](crate::data::Pointers)).
    ///
    /// ```
    /// use atomzarr::Level;
    /// assert_eq!(Level::Edge.pick(10, 25, 3), 25);
    /// assert_eq!(Level::System.pick(10, 25, 3), 3);
    /// ```
    #[inline]
    pub fn pick<T>(self, atoms: T, edges: T, samples: T) -> T {
        match self {
            Level::Atom => atoms,
            Level::Edge => edges,
            Level::System => samples,
        }
    }

    /// The name used in the store's `fields` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Atom => "atom",
            Level::Edge => "edge",
            Level::System => "system",
        }
    }

    /// Parses `"atom"`, `"edge"` or `"system"`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "atom" => Some(Level::Atom),
            "edge" => Some(Level::Edge),
            "system" => Some(Level::System),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Element types a field can hold (the Zarr v3 core numeric types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// `bool`
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `uint32`
    UInt32,
    /// `uint64`
    UInt64,
    /// `float16`
    Float16,
    /// `bfloat16`
    BFloat16,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
}

impl DType {
    /// Every supported dtype.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// The Zarr v3 (and numpy) name: `bool`, `int32`, `float32`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// Parses a Zarr v3 data type name.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
