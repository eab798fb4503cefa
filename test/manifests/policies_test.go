package manifests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// policyFamilies pairs each kind of admission policy with the kind of
// binding that enforces it.
var policyFamilies = []struct{ policy, binding string }{
	{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
	{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
}

// celExpression is one CEL expression of a policy, and where it is.
type celExpression struct {
	field, text string
}

// policyView is what the checks read of a policy of either family.
type policyView struct {
	paramKind        *admissionv1.ParamKind
	matchConstraints *admissionv1.MatchResources
	failurePolicy    *admissionv1.FailurePolicyType
	expressions      []celExpression
	validations      []admissionv1.Validation
}

func policyOf(o *object) policyView {
	var v policyView
	add := func(field, text string) {
		if text != "" {
			v.expressions = append(v.expressions, celExpression{field, text})
		}
	}
	var conditions []admissionv1.MatchCondition
	var variables []admissionv1.Variable
	switch p := o.typed.(type) {
	case *admissionv1.ValidatingAdmissionPolicy:
		v.paramKind, v.matchConstraints, v.failurePolicy = p.Spec.ParamKind, p.Spec.MatchConstraints, p.Spec.FailurePolicy
		conditions, variables, v.validations = p.Spec.MatchConditions, p.Spec.Variables, p.Spec.Validations
		for i, val := range p.Spec.Validations {
			add(fmt.Sprintf("spec.validations[%d].expression", i), val.Expression)
			add(fmt.Sprintf("spec.validations[%d].messageExpression", i), val.MessageExpression)
		}
		for i, a := range p.Spec.AuditAnnotations {
			add(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression)
		}
	case *admissionv1.MutatingAdmissionPolicy:
		v.paramKind, v.matchConstraints, v.failurePolicy = p.Spec.ParamKind, p.Spec.MatchConstraints, p.Spec.FailurePolicy
		conditions, variables = p.Spec.MatchConditions, p.Spec.Variables
		for i, m := range p.Spec.Mutations {
			if m.ApplyConfiguration != nil {
				add(fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), m.ApplyConfiguration.Expression)
			}
			if m.JSONPatch != nil {
				add(fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), m.JSONPatch.Expression)
			}
		}
	default:
		panic(fmt.Sprintf("%s is no admission policy", o))
	}
	for i, c := range conditions {
		add(fmt.Sprintf("spec.matchConditions[%d].expression", i), c.Expression)
	}
	for i, va := range variables {
		add(fmt.Sprintf("spec.variables[%d].expression", i), va.Expression)
	}
	return v
}

// bindingOf returns the policy name and the paramRef of a binding of either
// family.
func bindingOf(o *object) (policyName string, paramRef *admissionv1.ParamRef) {
	switch b := o.typed.(type) {
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		return b.Spec.PolicyName, b.Spec.ParamRef
	case *admissionv1.MutatingAdmissionPolicyBinding:
		return b.Spec.PolicyName, b.Spec.ParamRef
	}
	panic(fmt.Sprintf("%s is no admission policy binding", o))
}

// paramsDataKey finds params.data.key and params.data['key'] in CEL.
var paramsDataKey = regexp.MustCompile(`\bparams\.data(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['"]([^'"]+)['"]\s*\])`)

// policyProblems is problems' part for admission policies: each binding
// names a policy of its family in the set; a policy with a paramKind is
// bound with a paramRef to an object of that kind (namespace/name, or a
// selector that selects one) that has every params.data key the policy
// reads; a policy without a paramKind is bound without a paramRef; every
// policy is bound.
func (s *objectSet) policyProblems(complete bool, want func(*object, string, string, string, string) *object, errorf func(string, ...any)) {
	for _, f := range policyFamilies {
		bound := map[string]bool{}
		for _, o := range s.byKind[f.binding] {
			policyName, ref := bindingOf(o)
			if policyName == "" {
				errorf("%s: no spec.policyName", o)
				continue
			}
			bound[policyName] = true
			p := want(o, "spec.policyName", f.policy, "", policyName)
			if p == nil {
				continue
			}
			policy := policyOf(p)
			switch {
			case policy.paramKind == nil && ref != nil:
				errorf("%s: has a spec.paramRef, but its policy %s has no spec.paramKind", o, p.Name)
			case policy.paramKind != nil && ref == nil:
				errorf("%s: has no spec.paramRef, but its policy %s has spec.paramKind %s %s: the API server fails every request it matches", o, p.Name, policy.paramKind.APIVersion, policy.paramKind.Kind)
			case policy.paramKind != nil:
				for _, param := range s.paramsOf(o, ref, policy.paramKind, complete, want, errorf) {
					cm, ok := param.typed.(*corev1.ConfigMap)
					if !ok {
						continue
					}
					for _, e := range policy.expressions {
						for _, m := range paramsDataKey.FindAllStringSubmatch(e.text, -1) {
							key := m[1] + m[2]
							if _, ok := cm.Data[key]; !ok {
								errorf("%s: its policy %s reads params.data.%s (%s), which %s lacks", o, p.Name, key, e.field, param)
							}
						}
					}
				}
			}
		}
		if complete || len(s.byKind[f.binding]) > 0 {
			for _, o := range s.byKind[f.policy] {
				if !bound[o.Name] {
					errorf("%s: no %s binds it, so it is never enforced", o, f.binding)
				}
			}
		}
	}
}

// namespaceParams are the parameter kinds whose objects live in the
// namespace of each request, not in hitl's: the ApprovalPolicies a
// namespace's platform team writes. A paramRef selects every one of them
// there (no namespace, no name, a selector) and allows a namespace without
// any (parameterNotFoundAction Allow); the manifests hold none.
var namespaceParams = map[admissionv1.ParamKind]bool{
	{APIVersion: hitlv1.GroupVersion.String(), Kind: "ApprovalPolicy"}: true,
}

// paramsOf returns the parameter objects a binding's paramRef selects of
// the policy's paramKind, and reports a reference that selects none.
func (s *objectSet) paramsOf(o *object, ref *admissionv1.ParamRef, kind *admissionv1.ParamKind, complete bool, want func(*object, string, string, string, string) *object, errorf func(string, ...any)) []*object {
	if namespaceParams[*kind] {
		switch {
		case ref.Namespace != "" || ref.Name != "":
			errorf("%s: spec.paramRef names %s/%s, but %s %s parameters are the request namespace's: select them with no namespace and no name",
				o, ref.Namespace, ref.Name, kind.APIVersion, kind.Kind)
		case ref.Selector == nil:
			errorf("%s: spec.paramRef has no selector", o)
		case ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionv1.AllowAction:
			errorf("%s: spec.paramRef.parameterNotFoundAction is not Allow: the API server would refuse every request in a namespace without a %s", o, kind.Kind)
		}
		return nil
	}
	if ref.Namespace == "" && !clusterScoped[kind.Kind] {
		// The API server would then look for it in each request's
		// namespace; hitl's parameters live in its own namespace.
		errorf("%s: spec.paramRef has no namespace: the API server would look for the %s in each request's namespace", o, kind.Kind)
		return nil
	}
	switch {
	case ref.Name != "":
		param := want(o, "spec.paramRef", kind.Kind, ref.Namespace, ref.Name)
		if param == nil {
			return nil
		}
		if param.APIVersion != kind.APIVersion {
			errorf("%s: spec.paramRef names %s of apiVersion %s, but its policy's paramKind is %s %s", o, param, param.APIVersion, kind.APIVersion, kind.Kind)
			return nil
		}
		return []*object{param}
	case ref.Selector != nil:
		selector, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			errorf("%s: spec.paramRef.selector: %v", o, err)
			return nil
		}
		var params []*object
		for _, param := range s.byKind[kind.Kind] {
			if param.APIVersion == kind.APIVersion && param.Namespace == ref.Namespace && selector.Matches(labels.Set(param.Labels)) {
				params = append(params, param)
			}
		}
		if len(params) == 0 && (complete || len(s.byKind[kind.Kind]) > 0) {
			errorf("%s: spec.paramRef.selector %s selects no %s %s in namespace %q", o, selector, kind.APIVersion, kind.Kind, ref.Namespace)
		}
		return params
	default:
		errorf("%s: spec.paramRef has neither a name nor a selector", o)
		return nil
	}
}

// TestPoliciesSpellTheNamesGoUses checks that config/policies spells each
// name the Go code (api/v1alpha1) also uses as Go spells it (see
// nameProblems).
//
// Whether the CEL compiles is not checked here (that would need
// k8s.io/apiserver's CEL environment, which the module does not require):
// the envtest suites install the policies into a real API server, which
// compiles them, and exercise each one.
func TestPoliciesSpellTheNamesGoUses(t *testing.T) {
	plurals, codes := hitlPlurals(t), errorCodes(t)
	set := decodeAll(t, render(t, filepath.Join(configDir, "policies")))
	for _, p := range nameProblems(set, plurals, codes) {
		t.Error(p)
	}
}

// TestNameChecksFindMisspellings misspells one name at a time in a copy of
// config/policies and expects nameProblems to say so.
func TestNameChecksFindMisspellings(t *testing.T) {
	plurals, codes := hitlPlurals(t), errorCodes(t)
	cases := []struct {
		name, old, new, want string
	}{
		{"another label key", "'hitl.dev/agent' in object.metadata.labels", "'hitl.dev/agents' in object.metadata.labels", "spells the label hitl.dev/agents"},
		{"another RBAC verb", ".check('answer')", ".check('reply')", `checks RBAC verb "reply"`},
		{"another RBAC resource", ".resource('agents')", ".resource('agent')", `checks RBAC on resource "agent"`},
		{"another RBAC group", "authorizer.group('hitl.dev')", "authorizer.group('hitl.io')", `checks RBAC in group "hitl.io"`},
		{"another verb in a message", "RBAC verb ask on", "RBAC verb create on", "tells the user to grant verb create on agents.hitl.dev"},
		{"another code", "'BAD_TIMEOUT: the timeout", "'TIMEOUT_TOO_LONG: the timeout", `the message "TIMEOUT_TOO_LONG: the timeout `},
		{"no code", "'FORBIDDEN: spec.answeredBy", "'spec.answeredBy", `the message "spec.answeredBy must be`},
		{"another matched resource", "resources: [userquestions]", "resources: [userquestion]", "matches resource userquestion, which no CRD"},
		{"another matched group", "apiGroups: [hitl.dev]", "apiGroups: [hitl.io]", "matches apiGroups [hitl.io]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copyConfig(t)
			files, err := filepath.Glob(filepath.Join(root, "policies", "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			replaced := false
			for _, path := range files {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(data), c.old) {
					edit(t, path, map[string]string{c.old: c.new})
					replaced = true
					break
				}
			}
			if !replaced {
				t.Fatalf("no file of config/policies has %q", c.old)
			}
			docs := render(t, filepath.Join(root, "policies"))
			set, errs := decode(docs)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			found := nameProblems(set, plurals, codes)
			for _, p := range found {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("no problem says %q; found %q", c.want, found)
		})
	}
}

// nameProblems lists where the admission policies of set do not spell a
// name as api/v1alpha1 does: the label keys (hitlv1.AgentLabel,
// QuestionLabel) and the notifier's annotation (NotifiedAnnotation), the
// group, resource and verbs of the authorizer checks (GroupVersion.Group,
// AgentsResource, VerbAsk, VerbAnswer, VerbManage and VerbNotify) and of the messages that tell a user what to grant, the group
// and resources matched (plurals: the CRDs' resources), and the error code
// each validation's message starts with (codes: those of codes.go).
func nameProblems(set *objectSet, plurals, codes map[string]bool) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	group := hitlv1.GroupVersion.Group
	// The labels, and the one annotation (the notifier's record) a policy
	// spells.
	knownLabels := []string{hitlv1.AgentLabel, hitlv1.QuestionLabel, hitlv1.NotifiedAnnotation}
	verbs := []string{hitlv1.VerbAsk, hitlv1.VerbAnswer, hitlv1.VerbManage, hitlv1.VerbNotify}

	usedLabels, usedVerbs := map[string]bool{}, map[string]bool{}
	policies := 0
	for _, f := range policyFamilies {
		for _, o := range set.byKind[f.policy] {
			policies++
			p := policyOf(o)
			if p.matchConstraints == nil || len(p.matchConstraints.ResourceRules) == 0 {
				errorf("%s: no spec.matchConstraints.resourceRules", o)
			} else {
				for _, r := range p.matchConstraints.ResourceRules {
					if !slices.Equal(r.APIGroups, []string{group}) {
						errorf("%s: matches apiGroups %v, want [%s]", o, r.APIGroups, group)
					}
					for _, res := range r.Resources {
						if !plurals[res] {
							errorf("%s: matches resource %s, which no CRD of config/crd serves in %s", o, res, group)
						}
					}
				}
			}
			for _, e := range p.expressions {
				lits, err := celStrings(e.text)
				if err != nil {
					errorf("%s: %s: %v", o, e.field, err)
					continue
				}
				for _, lit := range lits {
					for _, key := range labelKeys(group, lit) {
						usedLabels[key] = true
						if !slices.Contains(knownLabels, key) {
							errorf("%s: %s spells the label %s, which api/v1alpha1 does not define (it has %v)", o, e.field, key, knownLabels)
						}
					}
					for _, m := range rbacInMessage(group).FindAllStringSubmatch(lit, -1) {
						if !slices.Contains(verbs, m[1]) || m[2] != hitlv1.AgentsResource {
							errorf("%s: %s tells the user to grant verb %s on %s.%s; Go checks %v on %s.%s", o, e.field, m[1], m[2], group, verbs, hitlv1.AgentsResource, group)
						}
					}
				}
				for _, call := range authorizerCall.FindAllStringSubmatch(e.text, -1) {
					method, arg := call[1], call[2]
					switch {
					case method == "group" && arg != group:
						errorf("%s: %s checks RBAC in group %q, not %s", o, e.field, arg, group)
					case method == "resource" && arg != hitlv1.AgentsResource:
						errorf("%s: %s checks RBAC on resource %q, not %s", o, e.field, arg, hitlv1.AgentsResource)
					case method == "check":
						usedVerbs[arg] = true
						if !slices.Contains(verbs, arg) {
							errorf("%s: %s checks RBAC verb %q, which is none of %v", o, e.field, arg, verbs)
						}
					}
				}
			}
			for i, v := range p.validations {
				message := v.Message
				if v.MessageExpression != "" {
					first, err := firstCELString(v.MessageExpression)
					if err != nil {
						errorf("%s: spec.validations[%d].messageExpression: %v", o, i, err)
						continue
					}
					message = first
				}
				code, _, found := strings.Cut(message, ": ")
				if !found || !codes[code] {
					errorf("%s: spec.validations[%d]: the message %q does not start with \"CODE: \" for a code of api/v1alpha1/codes.go", o, i, message)
				}
			}
		}
	}
	if policies == 0 {
		errorf("no admission policy")
	}
	for _, key := range []string{hitlv1.AgentLabel, hitlv1.QuestionLabel} {
		if !usedLabels[key] {
			errorf("no policy uses the label %s", key)
		}
	}
	for _, verb := range verbs {
		if !usedVerbs[verb] {
			errorf("no policy checks RBAC verb %s", verb)
		}
	}
	return problems
}

// hitlPlurals returns the resources of hitl's group the CRDs of config/crd
// define.
func hitlPlurals(t *testing.T) map[string]bool {
	t.Helper()
	plurals := map[string]bool{}
	for _, o := range decodeAll(t, render(t, filepath.Join(configDir, "crd"))).byKind["CustomResourceDefinition"] {
		if crd := o.typed.(*apiextensionsv1.CustomResourceDefinition); crd.Spec.Group == hitlv1.GroupVersion.Group {
			plurals[crd.Spec.Names.Plural] = true
		}
	}
	if len(plurals) == 0 {
		t.Fatal("config/crd has no CRD of hitl's group")
	}
	return plurals
}

// authorizerCall finds the string arguments of the authorizer library's
// group, resource and check calls.
var authorizerCall = regexp.MustCompile(`\.(group|resource|check)\(\s*['"]([^'"]*)['"]\s*\)`)

// rbacInMessage finds "verb V on R.<group>" in a message's text.
func rbacInMessage(group string) *regexp.Regexp {
	return regexp.MustCompile(`verb (\w+) on (\w+)\.` + regexp.QuoteMeta(group) + `\b`)
}

// labelKeys returns the keys <group>/<name> a string spells, but not the
// <resource>.<group>/<name> of an RBAC resource.
func labelKeys(group, s string) []string {
	var keys []string
	re := regexp.MustCompile(`(^|[^\w.])(` + regexp.QuoteMeta(group) + `/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)`)
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		keys = append(keys, m[2])
	}
	return keys
}

// celStrings returns the string literals of a CEL expression, unquoted:
// single- or double-quoted, with backslash escapes (CEL's triple-quoted and
// raw strings are refused, as hitl's policies do not use them).
func celStrings(expr string) ([]string, error) {
	var lits []string
	for i := 0; i < len(expr); i++ {
		quote := expr[i]
		if quote != '\'' && quote != '"' {
			continue
		}
		if strings.HasPrefix(expr[i:], strings.Repeat(string(quote), 3)) {
			return nil, fmt.Errorf("a triple-quoted string at %d is not read here", i)
		}
		if i > 0 && (expr[i-1] == 'r' || expr[i-1] == 'R' || expr[i-1] == 'b' || expr[i-1] == 'B') {
			return nil, fmt.Errorf("a raw or bytes string at %d is not read here", i)
		}
		var b strings.Builder
		j := i + 1
		for ; j < len(expr) && expr[j] != quote; j++ {
			if expr[j] == '\\' && j+1 < len(expr) {
				j++
			}
			b.WriteByte(expr[j])
		}
		if j == len(expr) {
			return nil, fmt.Errorf("unterminated string at %d", i)
		}
		lits = append(lits, b.String())
		i = j
	}
	return lits, nil
}

// firstCELString returns the string literal a messageExpression starts
// with: the start of the message.
func firstCELString(expr string) (string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || (expr[0] != '\'' && expr[0] != '"') {
		return "", fmt.Errorf("%q does not start with a string literal", expr)
	}
	lits, err := celStrings(expr)
	if err != nil {
		return "", err
	}
	return lits[0], nil
}

// errorCodes reads the ErrorCode constants of api/v1alpha1/codes.go, the one
// source of the codes.
func errorCodes(t *testing.T) map[string]bool {
	t.Helper()
	path := filepath.Join("..", "..", "api", "v1alpha1", "codes.go")
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "ErrorCode" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: an ErrorCode that is no string literal", path)
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[code] = true
			}
		}
	}
	// A code the Go code uses must be among them: the parse found the file's
	// constants.
	if !codes[string(hitlv1.CodeForbidden)] || !codes[string(hitlv1.CodeAgentMismatch)] || !codes[string(hitlv1.CodeBadTimeout)] {
		t.Fatalf("%s: read %v, which lacks codes the Go code has", path, codes)
	}
	return codes
}
