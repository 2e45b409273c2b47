//! The languages `leasehold review` reads, each behind its Cargo feature, and how a file's
//! language is told from its name.

use std::fmt;
use std::path::Path;

use serde::Serialize;

/// A source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Python.
    Python,
    /// Java.
    Java,
    /// Go.
    Go,
    /// JavaScript (and JSX).
    JavaScript,
    /// TypeScript.
    TypeScript,
    /// TSX.
    Tsx,
    /// Rust.
    Rust,
    /// PHP.
    Php,
    /// Ruby.
    Ruby,
}

impl Lang {
    /// The language of a file, by its extension, if this build reads it.
    pub fn of_path(path: &Path) -> Option<Lang> {
        let ext = path.extension()?.to_str()?;
        let lang = match ext {
            "py" | "pyi" => Lang::Python,
            "java" => Lang::Java,
            "go" => Lang::Go,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "rs" => Lang::Rust,
            "php" => Lang::Php,
            "rb" | "rake" => Lang::Ruby,
            _ => return None,
        };
        lang.compiled_in().then_some(lang)
    }

    /// Whether this build has the language's grammar.
    pub fn compiled_in(self) -> bool {
        match self {
            Lang::Python => cfg!(feature = "python"),
            Lang::Java => cfg!(feature = "java"),
            Lang::Go => cfg!(feature = "go"),
            Lang::JavaScript => cfg!(feature = "javascript"),
            Lang::TypeScript | Lang::Tsx => cfg!(feature = "typescript"),
            Lang::Rust => cfg!(feature = "rust"),
            Lang::Php => cfg!(feature = "php"),
            Lang::Ruby => cfg!(feature = "ruby"),
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Java => "java",
            Lang::Go => "go",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Rust => "rust",
            Lang::Php => "php",
            Lang::Ruby => "ruby",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
