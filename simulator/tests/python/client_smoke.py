"""Drives the simulated API server with the official Python `kubernetes` client.

Usage: python client_smoke.py http://127.0.0.1:PORT
Exits non-zero with a message on the first failed check; prints "python client: all checks passed".
"""
import sys
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def wait_for(what, fn, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    check(False, f"timed out waiting for {what}")


def pod(name, node=None):
    spec = client.V1PodSpec(
        containers=[client.V1Container(name="app", image="nginx",
                                       resources=client.V1ResourceRequirements(requests={"cpu": "100m"}))],
        node_name=node,
    )
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels={"app": "py"}), spec=spec)


def main(url):
    conf = client.Configuration()
    conf.host = url
    api_client = client.ApiClient(conf)
    core = client.CoreV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)

    # Discovery and list.
    names = [n.metadata.name for n in core.list_namespace().items]
    check("default" in names and "kube-system" in names, f"namespaces listed: {names}")
    version = client.VersionApi(api_client).get_code()
    check(version.major == "1", f"version: {version}")

    # A Ready node for the pods.
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="py-node")))
    core.patch_node_status("py-node", {"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})

    # Create, then list with a label selector and remember the list's resourceVersion.
    core.create_namespaced_pod("default", pod("py-1", node="py-node"))
    listed = core.list_namespaced_pod("default", label_selector="app=py")
    check([p.metadata.name for p in listed.items] == ["py-1"], "label-selected list")
    rv = listed.metadata.resource_version
    check(rv, "list carries a resourceVersion")

    # Changes after rv: a create and a patch, then watch from rv and see both.
    core.create_namespaced_pod("default", pod("py-2", node="py-node"))
    patched = core.patch_namespaced_pod("py-1", "default", {"metadata": {"labels": {"patched": "yes"}}})
    check(patched.metadata.labels.get("patched") == "yes", "patch applied")
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if ("ADDED", "py-2") in seen and any(t == "MODIFIED" and n == "py-1" for t, n in seen):
            w.stop()
    check(("ADDED", "py-2") in seen, f"watch saw py-2 added: {seen}")
    check(("ADDED", "py-1") not in seen, f"watch from rv does not replay py-1's creation: {seen}")
    check(any(t == "MODIFIED" and n == "py-1" for t, n in seen), f"watch saw py-1 patched: {seen}")

    # Field selectors the services use.
    on_node = core.list_namespaced_pod("default", field_selector="spec.nodeName=py-node")
    check(len(on_node.items) == 2, "field selector spec.nodeName")

    # Eviction with a PodDisruptionBudget: one allowed, the next refused with 429.
    wait_for("pods running", lambda: all(
        p.status.phase == "Running" for p in core.list_namespaced_pod("default", label_selector="app=py").items))
    policy.create_namespaced_pod_disruption_budget("default", client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="py"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1,
                                              selector=client.V1LabelSelector(match_labels={"app": "py"}))))
    eviction = lambda name: client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace="default"))
    core.create_namespaced_pod_eviction("py-1", "default", eviction("py-1"))
    try:
        core.create_namespaced_pod_eviction("py-2", "default", eviction("py-2"))
        check(False, "second eviction should be refused")
    except ApiException as e:
        check(e.status == 429, f"eviction refused with 429, got {e.status}: {e.body}")
    # An eviction deletes gracefully, as a real API server does: the pod goes once its
    # containers have stopped.
    def gone(name):
        try:
            core.read_namespaced_pod(name, "default")
            return False
        except ApiException as e:
            check(e.status == 404, f"evicted pod is 404, got {e.status}")
            return True
    wait_for("the evicted pod gone", lambda: gone("py-1"))

    # Custom resources: a Karpenter NodePool.
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "py-pool"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})
    pools = custom.list_cluster_custom_object("karpenter.sh", "v1", "nodepools")
    check([p["metadata"]["name"] for p in pools["items"]] == ["py-pool"], "NodePool listed")
    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "py-pool",
                                       {"spec": {"limits": {"cpu": "10"}}})
    got = custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", "py-pool")
    check(got["spec"]["limits"]["cpu"] == "10", "NodePool patched")

    # Dynamic Resource Allocation (resource.k8s.io/v1): a DeviceClass, a ResourceClaim and a
    # pod that references it, as a user of a DRA driver creates them.
    dra = client.ResourceV1Api(api_client)
    dra.create_device_class(client.V1DeviceClass(
        metadata=client.V1ObjectMeta(name="gpu.example.com"),
        spec=client.V1DeviceClassSpec(selectors=[client.V1DeviceSelector(
            cel=client.V1CELDeviceSelector(expression='device.driver == "gpu.example.com"'))])))
    dra.create_namespaced_resource_claim("default", client.ResourceV1ResourceClaim(
        metadata=client.V1ObjectMeta(name="single-gpu"),
        spec=client.V1ResourceClaimSpec(devices=client.V1DeviceClaim(requests=[client.V1DeviceRequest(
            name="gpu", exactly=client.V1ExactDeviceRequest(device_class_name="gpu.example.com"))]))))
    claims = dra.list_namespaced_resource_claim("default").items
    check([c.metadata.name for c in claims] == ["single-gpu"], "ResourceClaim listed")
    check(claims[0].spec.devices.requests[0].exactly.device_class_name == "gpu.example.com",
          "ResourceClaim's request kept")
    gpu_pod = pod("py-gpu")
    gpu_pod.metadata.labels = {"app": "py-gpu"}
    gpu_pod.spec.resource_claims = [client.V1PodResourceClaim(name="gpu", resource_claim_name="single-gpu")]
    gpu_pod.spec.containers[0].resources.claims = [client.CoreV1ResourceClaim(name="gpu")]
    core.create_namespaced_pod("default", gpu_pod)
    got = core.read_namespaced_pod("py-gpu", "default")
    check(got.spec.resource_claims[0].resource_claim_name == "single-gpu", "pod's resourceClaims kept")
    check(got.spec.containers[0].resources.claims[0].name == "gpu", "container's claims kept")

    print("python client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
