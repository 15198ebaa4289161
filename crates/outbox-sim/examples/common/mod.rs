//! Command-line reading shared by the study examples (`informed`, `gaps`).

use outbox_sim::Family;

/// The arguments: positional ones in order, `--name value` options, and bare flags (any other
/// argument starting with `-`).
pub struct Args {
    /// Arguments that are neither options nor flags, in order.
    pub positional: Vec<String>,
    values: Vec<(String, String)>,
    flags: Vec<String>,
}

impl Args {
    /// Reads the process's arguments; `valued` names the options that take a value.
    pub fn parse(valued: &[&str]) -> Self {
        let mut args = Args {
            positional: Vec::new(),
            values: Vec::new(),
            flags: Vec::new(),
        };
        let mut all = std::env::args().skip(1);
        while let Some(a) = all.next() {
            if valued.contains(&a.as_str()) {
                let value = all.next().unwrap_or_else(|| panic!("{a} needs a value"));
                args.values.push((a, value));
            } else if a.starts_with('-') {
                args.flags.push(a);
            } else {
                args.positional.push(a);
            }
        }
        args
    }

    /// The value of option `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether flag `name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// `--family`, the default family when absent.
    pub fn family(&self) -> Family {
        self.value("--family")
            .map_or(Family::Default, |f| f.parse().expect("a family"))
    }

    /// The router config TOML in the file named by positional argument 0, or plain `recall`.
    pub fn config(&self) -> String {
        self.positional
            .first()
            .map(|p| std::fs::read_to_string(p).expect("a readable config file"))
            .unwrap_or_else(|| "[strategy]\ntype = \"recall\"\n".into())
    }

    /// Positional argument `i`, comma-separated and parsed item by item, or `default`.
    pub fn list<T: std::str::FromStr>(&self, i: usize, default: &str) -> Vec<T>
    where
        T::Err: std::fmt::Debug,
    {
        self.positional
            .get(i)
            .map_or(default, String::as_str)
            .split(',')
            .map(|x| x.parse().expect("a list item"))
            .collect()
    }
}
