package v1alpha1_test

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

// table reads the namespace's questions as kubectl get does: as a
// server-side Table of the CRD's printer columns.
func table(ns string) *metav1.Table {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().AbsPath("/apis/hitl.dev/v1alpha1/namespaces", ns, "userquestions").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	t := &metav1.Table{}
	Expect(json.Unmarshal(raw, t)).To(Succeed())
	return t
}

// cell is the value of the named column in the table's first row.
func cell(t *metav1.Table, column string) any {
	GinkgoHelper()
	Expect(t.Rows).NotTo(BeEmpty())
	for i, c := range t.ColumnDefinitions {
		if c.Name == column {
			return t.Rows[0].Cells[i]
		}
	}
	Fail("no column " + column)
	return nil
}

var _ = Describe("kubectl get userquestions", func() {
	It("shows an open question's future deadline as a timestamp a person can read, not <invalid>", func() {
		ns := newNamespace()
		q := Question("timed", ns).Agent("bot").Ask("q", "Q?").Timeout(time.Hour).Obj()
		Expect(k8s.Create(ctx, q)).To(Succeed())
		deadline := metav1.NewMicroTime(time.Now().Add(time.Hour).Truncate(time.Microsecond))
		q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Deadline: &deadline}
		Expect(k8s.Status().Update(ctx, q)).To(Succeed())

		got := cell(table(ns), "Deadline")
		Expect(got).NotTo(Equal("<invalid>"))
		s, ok := got.(string)
		Expect(ok).To(BeTrue(), "the Deadline cell is %#v", got)
		parsed, err := time.Parse(time.RFC3339Nano, s)
		Expect(err).NotTo(HaveOccurred())
		Expect(parsed.Equal(deadline.Time)).To(BeTrue(), "the cell %q is the deadline %s", s, deadline.Time)
	})
})

var _ = Describe("The local control plane", func() {
	It("reports the Kubernetes version it was built from, not v0.0.0-master", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		v, err := dc.ServerVersion()
		Expect(err).NotTo(HaveOccurred())
		Expect(v.GitVersion).To(Equal("v1.37.2"))
		Expect(v.Major).To(Equal("1"))
		Expect(v.Minor).To(Equal("37"))
	})
})
