//! Kubernetes' effective requests of a pod, as `k8s.io/component-helpers/resource.PodRequests`
//! computes them: the one place this rule is written, for every reader of pods.

use std::collections::BTreeMap;
use std::ops::AddAssign;

/// Amounts by resource name, in whatever unit the caller reads them.
pub type Amounts<T> = BTreeMap<String, T>;

/// A container's requests after defaulting: each resource that has a limit but no request
/// requests its limit.
pub fn container<T: Copy>(limits: &Amounts<T>, requests: &Amounts<T>) -> Amounts<T> {
    let mut out = limits.clone();
    out.extend(requests.iter().map(|(k, v)| (k.clone(), *v)));
    out
}

/// Whether pod-level `spec.resources` replace this resource of the containers' sum.
pub fn is_pod_level(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// One init container: its requests (after [`container`]) and whether it is restartable (a
/// sidecar, `restartPolicy: Always`).
#[derive(Clone, Debug)]
pub struct InitContainer<T> {
    /// Its requests.
    pub requests: Amounts<T>,
    /// `restartPolicy: Always`.
    pub restartable: bool,
}

/// The effective requests of a pod: app containers are summed; init containers are walked in
/// order, restartable ones (sidecars) are added to the sum and accumulate, and each regular
/// init container needs its own requests plus the sidecars started before it; the pod needs
/// the larger of the two per resource. Pod-level resources replace cpu, memory and hugepages
/// when set. `overhead` is added last, and `pods` is `one_pod` (one pod in the caller's unit).
pub fn pod<T>(
    containers: &[Amounts<T>],
    init_containers: &[InitContainer<T>],
    pod_level: Option<&Amounts<T>>,
    overhead: Option<&Amounts<T>>,
    one_pod: T,
) -> Amounts<T>
where
    T: Copy + Default + Ord + AddAssign,
{
    let mut reqs = Amounts::new();
    for c in containers {
        add(&mut reqs, c);
    }
    let mut sidecars = Amounts::new();
    let mut init_max = Amounts::new();
    for c in init_containers {
        if c.restartable {
            add(&mut reqs, &c.requests);
            add(&mut sidecars, &c.requests);
            raise(&mut init_max, &sidecars);
        } else {
            let mut need = c.requests.clone();
            add(&mut need, &sidecars);
            raise(&mut init_max, &need);
        }
    }
    raise(&mut reqs, &init_max);
    for (k, v) in pod_level.into_iter().flatten() {
        if is_pod_level(k) {
            reqs.insert(k.clone(), *v);
        }
    }
    if let Some(o) = overhead {
        add(&mut reqs, o);
    }
    reqs.insert("pods".to_string(), one_pod);
    reqs
}

fn add<T: Copy + Default + AddAssign>(to: &mut Amounts<T>, more: &Amounts<T>) {
    for (k, v) in more {
        *to.entry(k.clone()).or_default() += *v;
    }
}

fn raise<T: Copy + Default + Ord>(to: &mut Amounts<T>, other: &Amounts<T>) {
    for (k, v) in other {
        let e = to.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(&str, i64)]) -> Amounts<i64> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
    }

    #[test]
    fn sidecars_init_containers_pod_level_and_overhead() {
        let containers = [
            amounts(&[("cpu", 500), ("memory", 100)]),
            container(&amounts(&[("cpu", 250)]), &Amounts::new()),
        ];
        let init = [
            InitContainer {
                requests: amounts(&[("cpu", 100)]),
                restartable: true,
            },
            InitContainer {
                requests: amounts(&[("cpu", 2000), ("memory", 10)]),
                restartable: false,
            },
        ];
        let r = pod(&containers, &init, None, Some(&amounts(&[("cpu", 10)])), 1);
        // max(500 + 250 + 100, 2000 + 100) + 10.
        assert_eq!(r, amounts(&[("cpu", 2110), ("memory", 100), ("pods", 1)]));
        let pod_level = amounts(&[("cpu", 4000), ("example.com/x", 1)]);
        let r = pod(&containers, &init, Some(&pod_level), None, 1);
        assert_eq!(r["cpu"], 4000);
        assert!(
            !r.contains_key("example.com/x"),
            "only cpu, memory, hugepages"
        );
    }

    #[test]
    fn a_request_overrides_its_limit() {
        let c = container(
            &amounts(&[("cpu", 2), ("memory", 3)]),
            &amounts(&[("cpu", 1)]),
        );
        assert_eq!(c, amounts(&[("cpu", 1), ("memory", 3)]));
    }
}
