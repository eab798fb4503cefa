// Package manifests renders every kustomization under config/ in-process,
// as `kubectl apply -k` would, and checks what comes out: each object
// decodes strictly against its kind's schema, and the objects that name one
// another (admission policy bindings and their policies and parameter
// ConfigMaps, cert-manager's Certificate and Issuer, the webhook
// configurations and their Service, RBAC bindings, the manager's
// ServiceAccount and certificate Secret) still agree after namePrefix and
// namespace rewrote them. It also pins what each install overlay holds
// (config/default: policies, no webhook; config/webhook-feedback and
// config/webhook-mode: which webhooks, failing open or closed), and that the
// policies spell the names and codes the Go code uses.
package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// configDir is config/ seen from this package's directory, where go test
// runs the test binary.
const configDir = "../../config"

// injectCAFrom is cert-manager's annotation naming the Certificate (as
// namespace/name) whose CA it writes into a webhook configuration.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// injectCALabel marks the webhook configurations the manager injects the CA
// of its own certificate into (internal/manager.InjectCALabel).
const injectCALabel = "hitl.dev/inject-ca-from-secret"

// TestEveryKustomizationRendersConsistently renders each kustomization under
// config/, decodes every object strictly and checks its references.
func TestEveryKustomizationRendersConsistently(t *testing.T) {
	dirs, topLevel := kustomizations(t)
	if len(dirs) == 0 {
		t.Fatal("no kustomization.yaml under config/")
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(configDir, dir)
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			objs := render(t, dir)
			if len(objs) == 0 {
				t.Fatal("renders no object")
			}
			set := decodeAll(t, objs)
			// An overlay that no other kustomization includes is meant to be
			// applied as it is: everything it names must be in it. A base
			// (config/rbac, config/manager, ...) is checked only against the
			// kinds it has.
			for _, p := range set.problems(topLevel[dir]) {
				t.Error(p)
			}
		})
	}
}

// TestDefaultOverlayIsComplete pins what config/default must hold for the
// manager to run with admission checked by policies inside the API server,
// and what it must not: no webhook and nothing of cert-manager.
func TestDefaultOverlayIsComplete(t *testing.T) {
	set := decodeAll(t, render(t, filepath.Join(configDir, "default")))
	for _, kind := range []string{
		"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Deployment", "ConfigMap",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
		"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
		"FlowSchema", "PriorityLevelConfiguration",
	} {
		if len(set.byKind[kind]) == 0 {
			t.Errorf("config/default has no %s", kind)
		}
	}
	for _, kind := range []string{
		"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Issuer", "ClusterIssuer", "Certificate",
	} {
		for _, o := range set.byKind[kind] {
			t.Errorf("config/default has %s: the default install needs no webhook and no cert-manager", o)
		}
	}
	for _, o := range set.all {
		switch {
		case o.Kind == "Namespace":
			if o.Name != "hitl-system" {
				t.Errorf("%s: want namespace hitl-system", o)
			}
		case clusterScoped[o.Kind]:
			// problems reports a namespace on these.
		case o.Namespace != "hitl-system":
			t.Errorf("%s is in namespace %q, not hitl-system", o, o.Namespace)
		}
	}
	// The parameter ConfigMap's maxTimeout is a duration the policy can read
	// (problems checks that the ConfigMap has every key a policy reads).
	if o := set.get("ConfigMap", "hitl-system", "hitl-admission"); o == nil {
		t.Error("config/default has no ConfigMap hitl-system/hitl-admission")
	} else if d, err := time.ParseDuration(o.typed.(*corev1.ConfigMap).Data["maxTimeout"]); err != nil || d <= 0 {
		t.Errorf("%s: data.maxTimeout is no positive duration (%v)", o, err)
	}
	// High availability: two leader-elected replicas, and a disruption
	// budget that lets a drain evict only one of them at a time.
	for _, o := range set.byKind["Deployment"] {
		d := o.typed.(*appsv1.Deployment)
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("%s: want at least 2 replicas", o)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--leader-elect") {
			t.Errorf("%s: the manager runs without --leader-elect (args %v)", o, args)
		}
		covered := false
		for _, b := range set.byKind["PodDisruptionBudget"] {
			pdb := b.typed.(*policyv1.PodDisruptionBudget)
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || b.Namespace != o.Namespace || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			covered = true
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
				t.Errorf("%s: minAvailable %v must keep one replica up and still let a drain evict one", b, pdb.Spec.MinAvailable)
			}
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", o)
		}
	}
	// Metrics: the manager serves them over HTTPS with authentication and
	// authorization (--metrics-secure), may review tokens and access for
	// that, a Service exposes them, and a reader role is there to bind.
	for _, o := range set.byKind["Deployment"] {
		args := o.typed.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--metrics-secure") || slices.Contains(args, "--metrics-bind-address=0") {
			t.Errorf("%s: the manager's metrics are not served securely (args %v)", o, args)
		}
	}
	if set.get("Service", "hitl-system", "hitl-controller-manager-metrics-service") == nil {
		t.Error("config/default has no metrics Service")
	}
	if r := set.get("ClusterRole", "", "hitl-metrics-reader"); r == nil || !slices.ContainsFunc(r.typed.(*rbacv1.ClusterRole).Rules, func(p rbacv1.PolicyRule) bool {
		return slices.Contains(p.NonResourceURLs, "/metrics") && slices.Contains(p.Verbs, "get")
	}) {
		t.Error("config/default has no ClusterRole hitl-metrics-reader granting get on /metrics")
	}
	for _, need := range []struct{ group, resource string }{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
		granted := false
		for _, b := range set.byKind["ClusterRoleBinding"] {
			crb := b.typed.(*rbacv1.ClusterRoleBinding)
			if !slices.ContainsFunc(crb.Subjects, func(s rbacv1.Subject) bool { return s.Name == "hitl-controller-manager" }) {
				continue
			}
			if r := set.get("ClusterRole", "", crb.RoleRef.Name); r != nil {
				granted = granted || slices.ContainsFunc(r.typed.(*rbacv1.ClusterRole).Rules, func(p rbacv1.PolicyRule) bool {
					return slices.Contains(p.APIGroups, need.group) && slices.Contains(p.Resources, need.resource) && slices.Contains(p.Verbs, "create")
				})
			}
		}
		if !granted {
			t.Errorf("the manager may not create %s: it cannot check who scrapes its metrics", need.resource)
		}
	}
	// API Priority and Fairness: the manager's own requests, and only
	// them, go to its own priority level, ahead of the built-in
	// service-accounts FlowSchema that would otherwise put them in
	// workload-low with every other ServiceAccount's.
	if f := set.get("FlowSchema", "", "hitl-manager"); f == nil {
		t.Error("config/default has no FlowSchema hitl-manager")
	} else {
		fs := f.typed.(*flowcontrolv1.FlowSchema)
		if fs.Spec.MatchingPrecedence <= 900 || fs.Spec.MatchingPrecedence >= 9000 {
			t.Errorf("%s: matchingPrecedence %d is not between the system FlowSchemas (up to 900) and service-accounts (9000)", f, fs.Spec.MatchingPrecedence)
		}
		if fs.Spec.DistinguisherMethod == nil || fs.Spec.DistinguisherMethod.Type != flowcontrolv1.FlowDistinguisherMethodByUserType {
			t.Errorf("%s: want distinguisherMethod ByUser", f)
		}
		if pl := set.get("PriorityLevelConfiguration", "", fs.Spec.PriorityLevelConfiguration.Name); pl == nil || pl.Name != "hitl-manager" {
			t.Errorf("%s: priority level %s, want hitl-manager", f, fs.Spec.PriorityLevelConfiguration.Name)
		} else if l := pl.typed.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Limited; l == nil || l.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue {
			t.Errorf("%s: want a Limited level that queues", pl)
		}
		var managerSA string
		for _, d := range set.byKind["Deployment"] {
			managerSA = "system:serviceaccount:" + d.Namespace + ":" + d.typed.(*appsv1.Deployment).Spec.Template.Spec.ServiceAccountName
		}
		var subjects []string
		resources := map[string]bool{}
		for _, r := range fs.Spec.Rules {
			for _, sub := range r.Subjects {
				if sa := sub.ServiceAccount; sa != nil {
					subjects = append(subjects, "system:serviceaccount:"+sa.Namespace+":"+sa.Name)
				} else {
					subjects = append(subjects, fmt.Sprintf("%s %+v %+v", sub.Kind, sub.User, sub.Group))
				}
			}
			for _, rr := range r.ResourceRules {
				for _, g := range rr.APIGroups {
					for _, res := range rr.Resources {
						resources[g+"/"+res] = slices.Contains(rr.Verbs, "update") || slices.Contains(rr.Verbs, "create")
					}
				}
			}
		}
		if len(subjects) != 1 || subjects[0] != managerSA {
			t.Errorf("%s: subjects %v, want the manager's ServiceAccount %s alone", f, subjects, managerSA)
		}
		for _, res := range []string{"hitl.dev/userquestions/status", "hitl.dev/questionreplies/status", "coordination.k8s.io/leases", "events.k8s.io/events"} {
			if !resources[res] {
				t.Errorf("%s: the manager's writes to %s are not in it", f, res)
			}
		}
	}
	// Its references are TestEveryKustomizationRendersConsistently's part,
	// its webhooks (none) and its manager's flags
	// TestOverlaysFailOpenButInWebhookMode's.
}

// TestOverlaysFailOpenButInWebhookMode checks every top-level overlay with a
// manager (an install) against overlayProblems, and that the three installs
// it knows are there to be checked.
func TestOverlaysFailOpenButInWebhookMode(t *testing.T) {
	dirs, topLevel := kustomizations(t)
	checked := map[string]bool{}
	for _, dir := range dirs {
		if !topLevel[dir] {
			continue
		}
		rel, _ := filepath.Rel(configDir, dir)
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			set := decodeAll(t, render(t, dir))
			if len(set.byKind["Deployment"]) == 0 {
				t.Skip("no manager: not an install")
			}
			checked[rel] = true
			for _, p := range overlayProblems(rel, set) {
				t.Error(p)
			}
		})
	}
	for _, want := range []string{"default", "webhook-feedback", "webhook-mode", "webhook-feedback-certmanager", "webhook-mode-certmanager"} {
		if !checked[want] {
			t.Errorf("config/%s is no top-level install overlay", want)
		}
	}
}

// TestSamplesAreValidAsks checks the samples beyond their schema: every
// UserQuestion is an ask the webhook admits, and every kind is served by a
// CRD of config/crd.
func TestSamplesAreValidAsks(t *testing.T) {
	crds := decodeAll(t, render(t, filepath.Join(configDir, "crd")))
	served := map[string]bool{}
	for _, o := range crds.byKind["CustomResourceDefinition"] {
		crd := o.typed.(*apiextensionsv1.CustomResourceDefinition)
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = true
			}
		}
	}
	samples := decodeAll(t, render(t, filepath.Join(configDir, "samples")))
	for _, o := range samples.all {
		if !served[o.APIVersion+"/"+o.Kind] {
			t.Errorf("%s: no CRD under config/crd serves %s %s", o, o.APIVersion, o.Kind)
		}
		if uq, ok := o.typed.(*hitlv1.UserQuestion); ok {
			if err := validation.ValidateAsk(&uq.Spec, 0); err != nil {
				t.Errorf("%s: %v", o, err)
			}
		}
	}
}

// kustomizations lists the directories under config/ that hold a
// kustomization, and marks those that no other kustomization includes.
func kustomizations(t *testing.T) (dirs []string, topLevel map[string]bool) {
	t.Helper()
	included := map[string]bool{}
	err := filepath.WalkDir(configDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !slices.Contains([]string{"kustomization.yaml", "kustomization.yml", "Kustomization"}, d.Name()) {
			return nil
		}
		dir := filepath.Dir(path)
		dirs = append(dirs, dir)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var k struct {
			Resources  []string `json:"resources"`
			Components []string `json:"components"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, r := range append(k.Resources, k.Components...) {
			included[filepath.Join(dir, r)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	topLevel = map[string]bool{}
	for _, dir := range dirs {
		topLevel[dir] = !included[dir]
	}
	return dirs, topLevel
}

// render builds the kustomization in dir with kustomize's defaults, as
// `kubectl apply -k` does, and returns each object's YAML.
func render(t *testing.T, dir string) [][]byte {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out [][]byte
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", r.CurId(), err)
		}
		out = append(out, data)
	}
	return out
}

// object is one rendered object: its identity, and its decoded form (a
// typed object of the scheme, or one of this file's cert-manager types).
type object struct {
	APIVersion, Kind, Namespace, Name string
	Labels, Annotations               map[string]string
	typed                             any
}

func (o *object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

type objectSet struct {
	all    []*object
	byKind map[string][]*object
}

// get returns the object of kind named namespace/name, or nil.
func (s *objectSet) get(kind, namespace, name string) *object {
	for _, o := range s.byKind[kind] {
		if o.Namespace == namespace && o.Name == name {
			return o
		}
	}
	return nil
}

// strictDecoder decodes the built-in kinds, CRDs and hitl's kinds, and
// fails on an unknown or duplicated field.
func strictDecoder() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, hitlv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

// cert-manager's kinds, with the fields hitl's manifests use (add a field
// here when a manifest starts using it).
type (
	certManagerMeta struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	issuer struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   certManagerMeta `json:"metadata"`
		Spec       struct {
			SelfSigned *struct{} `json:"selfSigned,omitempty"`
			CA         *struct {
				SecretName string `json:"secretName"`
			} `json:"ca,omitempty"`
		} `json:"spec"`
	}
	certificate struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   certManagerMeta `json:"metadata"`
		Spec       struct {
			CommonName string   `json:"commonName,omitempty"`
			DNSNames   []string `json:"dnsNames"`
			IsCA       bool     `json:"isCA,omitempty"`
			IssuerRef  struct {
				Name  string `json:"name"`
				Kind  string `json:"kind,omitempty"`
				Group string `json:"group,omitempty"`
			} `json:"issuerRef"`
			SecretName string `json:"secretName"`
		} `json:"spec"`
	}
)

func decodeAll(t *testing.T, docs [][]byte) *objectSet {
	t.Helper()
	set, errs := decode(docs)
	for _, err := range errs {
		t.Error(err)
	}
	return set
}

// decode decodes every document, and returns the objects that decoded and
// an error for each one that did not.
func decode(docs [][]byte) (*objectSet, []error) {
	decoder := strictDecoder()
	set := &objectSet{byKind: map[string][]*object{}}
	var errs []error
	for _, data := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(data, &head); err != nil {
			errs = append(errs, fmt.Errorf("%w:\n%s", err, data))
			continue
		}
		o := &object{
			APIVersion: head.APIVersion, Kind: head.Kind,
			Namespace: head.Metadata.Namespace, Name: head.Metadata.Name,
			Labels: head.Metadata.Labels, Annotations: head.Metadata.Annotations,
		}
		var err error
		switch {
		case strings.HasPrefix(o.APIVersion, "cert-manager.io/"):
			err = decodeCertManager(o, data)
		case strings.HasPrefix(o.APIVersion, "monitoring.coreos.com/"):
			err = decodeServiceMonitor(o, data)
		case strings.HasPrefix(o.APIVersion, admissionv1.GroupName+"/") && o.APIVersion != admissionv1.SchemeGroupVersion.String():
			// The checks read admission objects as the typed structs of
			// admissionregistration.k8s.io/v1, which has them all.
			err = fmt.Errorf("apiVersion %s: want %s", o.APIVersion, admissionv1.SchemeGroupVersion)
		default:
			o.typed, _, err = decoder.Decode(data, nil, nil)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s does not decode: %w", o, err))
			continue
		}
		set.all = append(set.all, o)
		set.byKind[o.Kind] = append(set.byKind[o.Kind], o)
	}
	return set, errs
}

// serviceMonitor is the Prometheus Operator's ServiceMonitor, with the
// fields hitl's manifests use.
type serviceMonitor struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   certManagerMeta `json:"metadata"`
	Spec       struct {
		Endpoints []struct {
			Path            string `json:"path"`
			Port            string `json:"port"`
			Scheme          string `json:"scheme"`
			Interval        string `json:"interval,omitempty"`
			BearerTokenFile string `json:"bearerTokenFile,omitempty"`
			TLSConfig       *struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
			} `json:"tlsConfig,omitempty"`
		} `json:"endpoints"`
		Selector metav1.LabelSelector `json:"selector"`
	} `json:"spec"`
}

func decodeServiceMonitor(o *object, data []byte) error {
	if o.APIVersion != "monitoring.coreos.com/v1" || o.Kind != "ServiceMonitor" {
		return fmt.Errorf("unknown kind %s %s", o.APIVersion, o.Kind)
	}
	var m serviceMonitor
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return err
	}
	o.typed = &m
	return nil
}

func decodeCertManager(o *object, data []byte) error {
	if o.APIVersion != "cert-manager.io/v1" {
		return fmt.Errorf("unknown cert-manager version %s", o.APIVersion)
	}
	switch o.Kind {
	case "Issuer", "ClusterIssuer":
		var i issuer
		if err := yaml.UnmarshalStrict(data, &i); err != nil {
			return err
		}
		if (i.Spec.SelfSigned == nil) == (i.Spec.CA == nil) {
			return fmt.Errorf("spec needs exactly one of selfSigned and ca")
		}
		o.typed = &i
	case "Certificate":
		var c certificate
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return err
		}
		if c.Spec.SecretName == "" || c.Spec.IssuerRef.Name == "" || len(c.Spec.DNSNames) == 0 {
			return fmt.Errorf("spec needs secretName, issuerRef.name and dnsNames")
		}
		o.typed = &c
	default:
		return fmt.Errorf("unknown cert-manager kind %s", o.Kind)
	}
	return nil
}

// problems lists what the objects of the set name and the set lacks, and
// what disagrees between them. With complete false, a reference to a kind
// the set has none of is not a problem.
func (s *objectSet) problems(complete bool) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// want reports a reference to kind namespace/name that is not in the set.
	want := func(from *object, what, kind, namespace, name string) *object {
		if !complete && len(s.byKind[kind]) == 0 {
			return nil
		}
		target := s.get(kind, namespace, name)
		if target == nil {
			ref := name
			if namespace != "" {
				ref = namespace + "/" + name
			}
			errorf("%s: %s names %s %s, which is not in the output", from, what, kind, ref)
		}
		return target
	}

	if complete {
		for _, o := range s.all {
			if o.Namespace != "" && s.get("Namespace", "", o.Namespace) == nil {
				errorf("%s: its namespace is not in the output", o)
			}
		}
	}
	// kustomize's namespace sets metadata.namespace on kinds it does not know
	// to be cluster-scoped (the admission policies among them); the
	// overlays take it off again (config/default).
	for _, o := range s.all {
		if clusterScoped[o.Kind] && o.Namespace != "" {
			errorf("%s: %s is cluster-scoped, yet it has a namespace", o, o.Kind)
		}
	}

	s.policyProblems(complete, want, errorf)

	usesCertManager := len(s.byKind["Certificate"]) > 0
	certSecrets := map[string]bool{} // namespace/secretName
	for _, o := range s.byKind["Certificate"] {
		c := o.typed.(*certificate)
		certSecrets[o.Namespace+"/"+c.Spec.SecretName] = true
		switch kind := c.Spec.IssuerRef.Kind; kind {
		case "", "Issuer":
			want(o, "spec.issuerRef", "Issuer", o.Namespace, c.Spec.IssuerRef.Name)
		case "ClusterIssuer":
			want(o, "spec.issuerRef", "ClusterIssuer", "", c.Spec.IssuerRef.Name)
		default:
			if c.Spec.IssuerRef.Group == "" || c.Spec.IssuerRef.Group == "cert-manager.io" {
				errorf("%s: spec.issuerRef.kind %q is no cert-manager issuer", o, kind)
			}
		}
	}

	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, o := range s.byKind[kind] {
			var services []*admissionv1.ServiceReference
			switch w := o.typed.(type) {
			case *admissionv1.MutatingWebhookConfiguration:
				for _, h := range w.Webhooks {
					services = append(services, h.ClientConfig.Service)
				}
			case *admissionv1.ValidatingWebhookConfiguration:
				for _, h := range w.Webhooks {
					services = append(services, h.ClientConfig.Service)
				}
			}
			var cert *certificate
			if from, ok := o.Annotations[injectCAFrom]; ok {
				namespace, name, found := strings.Cut(from, "/")
				if !found {
					errorf("%s: %s %q is not namespace/name", o, injectCAFrom, from)
				} else if c := want(o, injectCAFrom, "Certificate", namespace, name); c != nil {
					cert = c.typed.(*certificate)
				}
			} else if usesCertManager {
				errorf("%s: no %s annotation: cert-manager would not give it the CA", o, injectCAFrom)
			}
			for _, svc := range services {
				if svc == nil {
					continue // a URL webhook
				}
				want(o, "a webhook's clientConfig.service", "Service", svc.Namespace, svc.Name)
				if cert != nil {
					host := svc.Name + "." + svc.Namespace + ".svc"
					if !slices.Contains(cert.Spec.DNSNames, host) {
						errorf("%s: the certificate %s names %v, not the webhook Service's %s", o, o.Annotations[injectCAFrom], cert.Spec.DNSNames, host)
					}
				}
			}
		}
	}

	for _, o := range s.byKind["RoleBinding"] {
		b := o.typed.(*rbacv1.RoleBinding)
		roleNamespace := o.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNamespace = ""
		}
		want(o, "roleRef", b.RoleRef.Kind, roleNamespace, b.RoleRef.Name)
		checkSubjects(o, b.Subjects, want, errorf)
	}
	for _, o := range s.byKind["ClusterRoleBinding"] {
		b := o.typed.(*rbacv1.ClusterRoleBinding)
		if b.RoleRef.Kind != "ClusterRole" {
			errorf("%s: roleRef.kind is %q, not ClusterRole", o, b.RoleRef.Kind)
		}
		want(o, "roleRef", "ClusterRole", "", b.RoleRef.Name)
		checkSubjects(o, b.Subjects, want, errorf)
	}

	// A FlowSchema sends its requests to a priority level that is there,
	// and names ServiceAccounts that are (config/default renames the
	// manager's by a replacement: kustomize does not follow names into a
	// FlowSchema).
	for _, o := range s.byKind["FlowSchema"] {
		f := o.typed.(*flowcontrolv1.FlowSchema)
		want(o, "spec.priorityLevelConfiguration", "PriorityLevelConfiguration", "", f.Spec.PriorityLevelConfiguration.Name)
		for _, r := range f.Spec.Rules {
			for _, sub := range r.Subjects {
				if sub.Kind == flowcontrolv1.SubjectKindServiceAccount && sub.ServiceAccount != nil {
					want(o, "a subject", "ServiceAccount", sub.ServiceAccount.Namespace, sub.ServiceAccount.Name)
				}
			}
		}
	}

	for _, o := range s.byKind["Deployment"] {
		d := o.typed.(*appsv1.Deployment)
		pod := d.Spec.Template.Spec
		sa := pod.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		if sa != "default" || complete {
			want(o, "serviceAccountName", "ServiceAccount", o.Namespace, sa)
		}
		for _, v := range pod.Volumes {
			if v.Secret == nil || !usesCertManager {
				continue
			}
			if !certSecrets[o.Namespace+"/"+v.Secret.SecretName] {
				errorf("%s: volume %s mounts Secret %s, which no Certificate in its namespace issues", o, v.Name, v.Secret.SecretName)
			}
		}
		selector, err := labelsSelector(d)
		if err != nil {
			errorf("%s: %v", o, err)
		} else if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
			errorf("%s: spec.selector does not select its own pod template", o)
		}
	}

	// A ServiceMonitor selects a Service of its namespace by a port it has,
	// and scrapes HTTPS with a token (the manager's metrics need both).
	for _, o := range s.byKind["ServiceMonitor"] {
		m := o.typed.(*serviceMonitor)
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil {
			errorf("%s: %v", o, err)
			continue
		}
		for _, e := range m.Spec.Endpoints {
			found := false
			for _, svc := range s.byKind["Service"] {
				if svc.Namespace != o.Namespace || !sel.Matches(labels.Set(svc.Labels)) {
					continue
				}
				for _, p := range svc.typed.(*corev1.Service).Spec.Ports {
					found = found || p.Name == e.Port
				}
			}
			if !found && (complete || len(s.byKind["Service"]) > 0) {
				errorf("%s: endpoint port %q is no port of a Service it selects", o, e.Port)
			}
			if e.Scheme != "https" || e.BearerTokenFile == "" {
				errorf("%s: endpoint port %q scrapes without HTTPS and a token, which the manager's metrics refuse", o, e.Port)
			}
		}
	}

	// A Service selects the pods of a Deployment in its namespace, and sends
	// to a port they have.
	if complete || len(s.byKind["Deployment"]) > 0 {
		for _, o := range s.byKind["Service"] {
			svc := o.typed.(*corev1.Service)
			if len(svc.Spec.Selector) == 0 {
				continue
			}
			var pods []corev1.PodTemplateSpec
			for _, d := range s.byKind["Deployment"] {
				tmpl := d.typed.(*appsv1.Deployment).Spec.Template
				if d.Namespace == o.Namespace && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
					pods = append(pods, tmpl)
				}
			}
			if len(pods) == 0 {
				errorf("%s: its selector %v selects no Deployment's pods in its namespace", o, svc.Spec.Selector)
				continue
			}
			for _, port := range svc.Spec.Ports {
				if !slices.ContainsFunc(pods, func(p corev1.PodTemplateSpec) bool { return hasPort(p, port) }) {
					errorf("%s: port %d targets %s, which the selected pods do not expose", o, port.Port, port.TargetPort.String())
				}
			}
		}
	}
	return problems
}

// clusterScoped are the cluster-scoped kinds hitl's manifests have (or
// might: ClusterIssuer); every other kind is namespaced.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"ClusterIssuer": true, "FlowSchema": true, "PriorityLevelConfiguration": true,
}

// overlayProblems lists what is wrong with the install overlay config/<name>
// as a whole (its references are problems' part):
//   - Its manager serves webhooks (--enable-webhooks) if and only if the
//     overlay has webhook configurations: config/default has neither.
//   - No webhook fails closed (failurePolicy Fail, also the default), so that
//     asking and answering go on while the manager is down, but the mutating
//     webhooks of config/webhook-mode, which stamp in place of the mutating
//     policies and must not let a reply in unstamped.
//   - Every admission policy fails closed, and every validating binding
//     denies.
//   - Questions and replies are stamped, by a MutatingAdmissionPolicy or (in
//     config/webhook-mode only) a mutating webhook.
//   - config/webhook-feedback has exactly the validating reply webhook;
//     config/webhook-mode has no MutatingAdmissionPolicy(Binding), for
//     clusters that lack the kind.
func overlayProblems(name string, s *objectSet) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	webhookMode := strings.HasPrefix(name, "webhook-mode")
	name = strings.TrimSuffix(name, "-certmanager")

	type hook struct {
		config   *object
		mutating bool
		name     string
		fail     bool
		rules    []admissionv1.RuleWithOperations
	}
	var hooks []hook
	for _, o := range s.byKind["MutatingWebhookConfiguration"] {
		for _, h := range o.typed.(*admissionv1.MutatingWebhookConfiguration).Webhooks {
			hooks = append(hooks, hook{o, true, h.Name, h.FailurePolicy == nil || *h.FailurePolicy == admissionv1.Fail, h.Rules})
		}
	}
	for _, o := range s.byKind["ValidatingWebhookConfiguration"] {
		for _, h := range o.typed.(*admissionv1.ValidatingWebhookConfiguration).Webhooks {
			hooks = append(hooks, hook{o, false, h.Name, h.FailurePolicy == nil || *h.FailurePolicy == admissionv1.Fail, h.Rules})
		}
	}

	for _, o := range s.byKind["Deployment"] {
		serves := enablesWebhooks(o.typed.(*appsv1.Deployment))
		switch {
		case serves && len(hooks) == 0:
			errorf("config/%s: %s runs with --enable-webhooks, but the overlay has no webhook configuration", name, o)
		case !serves && len(hooks) > 0:
			errorf("config/%s: %s does not run with --enable-webhooks, but the overlay has webhooks", name, o)
		}
	}

	// A manager that provisions its own certificate (--webhook-cert-secret)
	// writes it to a writable volume at its certificate directory and
	// injects the CA into exactly the configurations labelled with its
	// Secret; without it (cert-manager), cert-manager injects.
	for _, o := range s.byKind["Deployment"] {
		d := o.typed.(*appsv1.Deployment)
		secret, dir := flagValue(d, "webhook-cert-secret"), flagValue(d, "webhook-cert-dir")
		if secret == "" || len(hooks) == 0 {
			continue
		}
		if dir == "" {
			dir = "/tmp/k8s-webhook-server/serving-certs"
		}
		if !writableAt(d, dir) {
			errorf("config/%s: %s writes its certificate to %s, which is not a writable volume", name, o, dir)
		}
		for _, h := range hooks {
			switch got, ok := h.config.Labels[injectCALabel]; {
			case !ok && h.config.Annotations[injectCAFrom] == "":
				errorf("config/%s: %s: nothing injects a CA (no %s label, no %s annotation)", name, h.config, injectCALabel, injectCAFrom)
			case ok && got != secret:
				errorf("config/%s: %s: %s=%s, but the manager provisions the Secret %s", name, h.config, injectCALabel, got, secret)
			}
		}
	}

	for _, h := range hooks {
		switch {
		case h.fail && !(webhookMode && h.mutating):
			errorf("config/%s: %s: webhook %s has failurePolicy Fail: while the manager is down nothing it matches is admitted (only config/webhook-mode's mutating webhooks fail closed)", name, h.config, h.name)
		case !h.fail && webhookMode && h.mutating:
			errorf("config/%s: %s: webhook %s does not have failurePolicy Fail: in webhook mode it stamps in place of the mutating policies, and nothing may be admitted unstamped", name, h.config, h.name)
		}
	}

	for _, f := range policyFamilies {
		for _, o := range s.byKind[f.policy] {
			if p := policyOf(o); p.failurePolicy != nil && *p.failurePolicy != admissionv1.Fail {
				errorf("config/%s: %s has failurePolicy %s: a policy that fails open lets unchecked objects in", name, o, *p.failurePolicy)
			}
		}
	}
	for _, o := range s.byKind["ValidatingAdmissionPolicyBinding"] {
		if b := o.typed.(*admissionv1.ValidatingAdmissionPolicyBinding); !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) {
			errorf("config/%s: %s: spec.validationActions %v lacks Deny", name, o, b.Spec.ValidationActions)
		}
	}

	// Something stamps each of hitl's kinds: the agent label of a question,
	// the author and question label of a reply.
	for _, resource := range []string{"userquestions", "questionreplies"} {
		stamped := false
		for _, o := range s.byKind["MutatingAdmissionPolicy"] {
			if mc := o.typed.(*admissionv1.MutatingAdmissionPolicy).Spec.MatchConstraints; mc != nil {
				for _, r := range mc.ResourceRules {
					stamped = stamped || ruleMatches(r.RuleWithOperations, resource)
				}
			}
		}
		for _, h := range hooks {
			for _, r := range h.rules {
				if h.mutating && ruleMatches(r, resource) {
					if !webhookMode {
						errorf("config/%s: %s: webhook %s stamps %s, which only config/webhook-mode leaves to a webhook", name, h.config, h.name, resource)
					}
					stamped = true
				}
			}
		}
		if !stamped {
			errorf("config/%s: nothing stamps %s on CREATE: no MutatingAdmissionPolicy and no mutating webhook matches it", name, resource)
		}
	}

	switch name {
	case "webhook-feedback":
		if len(hooks) != 1 || hooks[0].mutating || hooks[0].name != "vquestionreply.hitl.dev" || hooks[0].fail {
			var got []string
			for _, h := range hooks {
				got = append(got, fmt.Sprintf("%s (%s, fail=%t)", h.name, h.config.Kind, h.fail))
			}
			errorf("config/webhook-feedback: want exactly the validating webhook vquestionreply.hitl.dev with failurePolicy Ignore, have %v", got)
		}
	case "webhook-mode":
		for _, kind := range []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} {
			for _, o := range s.byKind[kind] {
				errorf("config/webhook-mode: has %s, a kind the clusters it is for do not have", o)
			}
		}
	}
	return problems
}

// ruleMatches tells whether rule matches CREATE of resource in hitl's group.
func ruleMatches(rule admissionv1.RuleWithOperations, resource string) bool {
	anyOf := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	ops := make([]string, len(rule.Operations))
	for i, op := range rule.Operations {
		ops[i] = string(op)
	}
	return anyOf(rule.APIGroups, hitlv1.GroupVersion.Group) && anyOf(rule.Resources, resource) && anyOf(ops, string(admissionv1.Create))
}

// enablesWebhooks tells whether a container of d runs with --enable-webhooks
// (or -enable-webhooks, =true).
func enablesWebhooks(d *appsv1.Deployment) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, arg := range append(slices.Clone(c.Command), c.Args...) {
			flag, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if !strings.HasPrefix(arg, "-") || flag != "enable-webhooks" {
				continue
			}
			if on, err := strconv.ParseBool(value); !hasValue || (err == nil && on) {
				return true
			}
		}
	}
	return false
}

// flagValue returns the value of --name=value in the manager container's
// arguments, or "".
func flagValue(d *appsv1.Deployment, name string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, arg := range append(slices.Clone(c.Command), c.Args...) {
			if v, ok := strings.CutPrefix(strings.TrimLeft(arg, "-"), name+"="); ok && strings.HasPrefix(arg, "-") {
				return v
			}
		}
	}
	return ""
}

// writableAt tells whether a container of d mounts a writable emptyDir at
// dir.
func writableAt(d *appsv1.Deployment, dir string) bool {
	pod := d.Spec.Template.Spec
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath != dir || m.ReadOnly {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.EmptyDir != nil {
					return true
				}
			}
		}
	}
	return false
}

func checkSubjects(o *object, subjects []rbacv1.Subject, want func(*object, string, string, string, string) *object, errorf func(string, ...any)) {
	for _, sub := range subjects {
		if sub.Kind != rbacv1.ServiceAccountKind {
			continue
		}
		if sub.Namespace == "" {
			errorf("%s: subject ServiceAccount %s has no namespace", o, sub.Name)
			continue
		}
		want(o, "a subject", "ServiceAccount", sub.Namespace, sub.Name)
	}
}

func labelsSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil {
		return nil, fmt.Errorf("no spec.selector")
	}
	if len(d.Spec.Selector.MatchExpressions) > 0 {
		return nil, fmt.Errorf("spec.selector.matchExpressions is not checked here")
	}
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels), nil
}

func hasPort(pod corev1.PodTemplateSpec, port corev1.ServicePort) bool {
	target := port.TargetPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			switch {
			case target.StrVal != "" && p.Name == target.StrVal:
				return true
			case target.StrVal == "" && target.IntVal == 0 && p.ContainerPort == port.Port:
				return true
			case target.StrVal == "" && target.IntVal != 0 && p.ContainerPort == target.IntVal:
				return true
			}
		}
	}
	return false
}
