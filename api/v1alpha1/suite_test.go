package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/test/testenv"
)

// This suite installs the generated CRDs into a real kube-apiserver and
// proves what the CRDs alone enforce: the CEL rules and their codes.
func TestCRDs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CRD validation suite")
}

var (
	env *envtest.Environment
	cfg *rest.Config
	k8s client.Client
	ctx = context.Background()
)

var _ = BeforeSuite(func() {
	env = testenv.New()
	var err error
	cfg, k8s, err = testenv.Start(env)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
