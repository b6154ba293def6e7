//! A loaded set of named texts (agent definitions, skills): by name, the first to take a name
//! keeping it, a profile's overlay replacing a body.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// What a set holds: a name, and a body an overlay may replace.
pub trait Named {
    fn name(&self) -> &str;
    fn body_mut(&mut self) -> &mut String;
}

/// The set, by name.
#[derive(Clone, Debug)]
pub struct ByName<T> {
    by_name: BTreeMap<String, T>,
}

impl<T> Default for ByName<T> {
    fn default() -> Self {
        ByName { by_name: BTreeMap::new() }
    }
}

impl<T: Named> ByName<T> {
    pub fn get(&self, name: &str) -> Option<&T> {
        self.by_name.get(name)
    }

    /// Adds `item` unless its name is taken; then `Err` with it and the one that holds the name.
    pub fn add(&mut self, item: T) -> Result<(), (T, &T)> {
        match self.by_name.entry(item.name().to_owned()) {
            Entry::Occupied(held) => Err((item, held.into_mut())),
            Entry::Vacant(free) => {
                free.insert(item);
                Ok(())
            }
        }
    }

    /// Replaces a body (a profile's overlay); `false` when none has that name.
    pub fn set_body(&mut self, name: &str, body: String) -> bool {
        match self.by_name.get_mut(name) {
            Some(item) => {
                *item.body_mut() = body;
                true
            }
            None => false,
        }
    }

    /// Every item, by name.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.by_name.values()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// The first of each name kept, as `add` keeps it.
impl<T: Named> FromIterator<T> for ByName<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut set = ByName::default();
        for item in items {
            let _ = set.add(item);
        }
        set
    }
}
