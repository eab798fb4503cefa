package access

import "testing"

func TestServiceAccountOf(t *testing.T) {
	for _, tc := range []struct {
		username, namespace, name string
		ok                        bool
	}{
		{"system:serviceaccount:agents:deploy-bot", "agents", "deploy-bot", true},
		{"alice", "", "", false},
		{"system:serviceaccount:agents", "", "", false},
		{"system:serviceaccount::deploy-bot", "", "", false},
		{"system:serviceaccount:agents:", "", "", false},
		{"system:serviceaccount:agents:deploy-bot:extra", "", "", false},
		{"system:serviceaccounts:agents:deploy-bot", "", "", false},
		{"system:node:agents:deploy-bot", "", "", false},
	} {
		ns, name, ok := ServiceAccountOf(tc.username)
		if ns != tc.namespace || name != tc.name || ok != tc.ok {
			t.Errorf("ServiceAccountOf(%q) = %q, %q, %v; want %q, %q, %v", tc.username, ns, name, ok, tc.namespace, tc.name, tc.ok)
		}
	}
}
