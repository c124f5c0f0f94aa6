//! The pod queue (Karpenter's `queue.go`): largest pods first, failed pods retried after the
//! others until a whole pass makes no progress.

use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};

use crate::model::Pod;

/// Karpenter's order: cpu descending, memory descending, then creation time and uid (and
/// `namespace/name`, so that the order never depends on input order).
///
/// CapacityBuffer virtual pods come after every real pod (Karpenter v1.14 sorts them among the
/// real pods by size, `VirtualPodPriority`'s note in `pkg/apis/autoscaling/v1beta1/constants.go`;
/// their lowest priority means they never take room from a real pod, as the cluster
/// autoscaler's buffers do).
pub(crate) fn compare(a: &Pod, b: &Pod) -> Ordering {
    crate::buffers::is_virtual(a)
        .cmp(&crate::buffers::is_virtual(b))
        .then_with(|| by_size(a, b))
}

fn by_size(a: &Pod, b: &Pod) -> Ordering {
    b.requests
        .cpu
        .cmp(&a.requests.cpu)
        .then_with(|| b.requests.memory.cmp(&a.requests.memory))
        .then_with(|| match (a.creation_time, b.creation_time) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.name.cmp(&b.name))
}

/// A FIFO of work items with Karpenter's stop rule: when the item at the head was pushed back
/// at the current queue length, a full pass went by without progress.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    items: VecDeque<u32>,
    last_len: HashMap<u32, usize>,
}

// === impl Queue ===

impl Queue {
    /// A queue of items already in order.
    pub(crate) fn new(items: impl IntoIterator<Item = u32>) -> Self {
        Self {
            items: items.into_iter().collect(),
            last_len: HashMap::new(),
        }
    }

    /// The next item, or `None` when empty or when no progress is possible.
    pub(crate) fn pop(&mut self) -> Option<u32> {
        let head = *self.items.front()?;
        if self.last_len.get(&head) == Some(&self.items.len()) {
            return None;
        }
        self.items.pop_front()
    }

    /// Puts a failed item back at the end. A relaxed item resets the progress tracking, since
    /// it may now fit where it did not.
    pub(crate) fn push(&mut self, item: u32, relaxed: bool) {
        self.items.push_back(item);
        if relaxed {
            self.last_len.clear();
        } else {
            self.last_len.insert(item, self.items.len());
        }
    }

    /// Items left when the loop stopped.
    pub(crate) fn remaining(&self) -> impl Iterator<Item = u32> + '_ {
        self.items.iter().copied()
    }
}
