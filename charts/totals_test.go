package charts

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestChart_ReferenceTotals adds up the default requests of every Deployment
// (replicas, or the HPA's minimum, times the container's requests): the
// reference deployment is 15 cores and 9,640 MiB.
func TestChart_ReferenceTotals(t *testing.T) {
	r := render(t, nil)
	cpu, mem := resource.Quantity{}, resource.Quantity{}
	n := 0
	for _, m := range r.objects {
		if m.kind != "Deployment" {
			continue
		}
		comp := m.name[len(release+"-threatview-"):]
		if beyondReference[comp] {
			continue
		}
		n++
		if _, ok := reference[comp]; !ok {
			t.Errorf("Deployment %s is not in the reference table", m.name)
		}
		replicas := effectiveReplicas(t, r, comp)
		req := r.deployment(t, comp).Spec.Template.Spec.Containers[0].Resources.Requests
		for i := int32(0); i < replicas; i++ {
			cpu.Add(req[corev1.ResourceCPU])
			mem.Add(req[corev1.ResourceMemory])
		}
	}
	if n != len(reference) {
		t.Errorf("%d Deployments, want the reference's %d", n, len(reference))
	}
	if cpu.Cmp(resource.MustParse("15")) != 0 {
		t.Errorf("default CPU requests add up to %s, want 15", cpu.String())
	}
	if mem.Cmp(resource.MustParse("9640Mi")) != 0 {
		t.Errorf("default memory requests add up to %dMi, want 9640Mi", mem.Value()>>20)
	}
}
