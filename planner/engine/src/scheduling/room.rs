//! The free resources of a run's existing nodes, indexed so that a pod finds the first node
//! with room for it without trying every fuller node before it ([`Room`]).
//!
//! A disruption simulation places hundreds of displaced pods on a thousand existing nodes in
//! first-fit order; the nodes first in line fill up, and every later pod with its own requests
//! (its own cursor) would try each of them again. The index is a segment tree over the nodes in
//! their order holding, per slot, the most free room under each subtree: subtrees where some
//! slot has less room than the pod needs are skipped whole.

/// Free room per slot of every existing node of a run (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Room {
    /// Number of nodes.
    len: usize,
    /// Leaves of the tree (a power of two, at least `len`).
    leaves: usize,
    /// Slots per node.
    slots: usize,
    /// Per tree node (1-based heap order), per slot: the most free room below it.
    max: Vec<i64>,
}

// === impl Room ===

impl Room {
    /// The index of `free` (per node, its free room per slot; every one `slots` long).
    pub(super) fn new<'f>(free: impl ExactSizeIterator<Item = &'f [i64]>, slots: usize) -> Self {
        let len = free.len();
        let leaves = len.max(1).next_power_of_two();
        let mut max = vec![i64::MIN; 2 * leaves * slots];
        for (i, f) in free.enumerate() {
            let at = (leaves + i) * slots;
            max[at..at + slots].copy_from_slice(&f[..slots]);
        }
        let mut room = Self {
            len,
            leaves,
            slots,
            max,
        };
        for t in (1..leaves).rev() {
            room.pull(t);
        }
        room
    }

    /// Sets node `i`'s free room.
    pub(super) fn set(&mut self, i: usize, free: &[i64]) {
        let s = self.slots;
        let mut t = self.leaves + i;
        self.max[t * s..(t + 1) * s].copy_from_slice(&free[..s]);
        while t > 1 {
            t /= 2;
            self.pull(t);
        }
    }

    /// The first node at or after `from` with at least `need` free in every slot; every node
    /// between `from` and it lacks room in some slot. `None` when no node from `from` on has
    /// room.
    pub(super) fn next(&self, from: usize, need: &[i64]) -> Option<usize> {
        if from >= self.len {
            return None;
        }
        // Most often the node asked first has room (the pod is then turned down, if at all,
        // for other reasons): no descent.
        if self.holds(self.leaves + from, need) {
            return Some(from);
        }
        self.find(1, 0, self.leaves, from, need)
            .filter(|&i| i < self.len)
    }

    fn find(&self, t: usize, lo: usize, hi: usize, from: usize, need: &[i64]) -> Option<usize> {
        if hi <= from || !self.holds(t, need) {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.find(2 * t, lo, mid, from, need)
            .or_else(|| self.find(2 * t + 1, mid, hi, from, need))
    }

    fn holds(&self, t: usize, need: &[i64]) -> bool {
        let s = self.slots;
        self.max[t * s..(t + 1) * s]
            .iter()
            .zip(need)
            .all(|(m, n)| n <= m)
    }

    fn pull(&mut self, t: usize) {
        let s = self.slots;
        for r in 0..s {
            self.max[t * s + r] = self.max[2 * t * s + r].max(self.max[(2 * t + 1) * s + r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Room;

    /// `next` agrees with a scan for the first node with room, before and after updates.
    #[test]
    fn next_is_the_first_node_with_room() {
        let mut free: Vec<Vec<i64>> = (0..37)
            .map(|i| vec![(i * 7919) % 13, (i * 104_729) % 11 - 2])
            .collect();
        let scan = |free: &[Vec<i64>], from: usize, need: &[i64]| {
            (from..free.len()).find(|&i| free[i].iter().zip(need).all(|(f, n)| n <= f))
        };
        let mut room = Room::new(free.iter().map(Vec::as_slice), 2);
        for step in 0..200i64 {
            let need = [step % 14, step % 9 - 3];
            let from = (step as usize * 5) % 40;
            assert_eq!(
                room.next(from, &need),
                scan(&free, from, &need),
                "step {step}"
            );
            let i = (step as usize * 3) % free.len();
            free[i] = vec![(step * 31) % 15 - 1, (step * 17) % 10];
            room.set(i, &free[i]);
        }
        assert_eq!(Room::new(std::iter::empty(), 2).next(0, &[0, 0]), None);
    }
}
