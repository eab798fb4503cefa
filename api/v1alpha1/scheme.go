package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme returns a scheme that knows Kubernetes' built-in kinds and
// hitl's: the one every hitl client, server and manager is built with.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // only on a conflict between the built-in kinds' registrations
	}
	if err := AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
