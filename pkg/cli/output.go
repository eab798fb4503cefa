package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// validOutput checks an -o value.
func validOutput(format string, allowed ...string) error {
	for _, a := range append(allowed, "") {
		if format == a {
			return nil
		}
	}
	return fmt.Errorf("unsupported output format %q (use one of %v)", format, allowed)
}

// printObject prints an API object as JSON or YAML, with its kind set.
func printObject(w io.Writer, obj runtime.Object, format string) error {
	if gvk, err := apiutil.GVKForObject(obj, scheme()); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return printValue(w, obj, format)
}

// printValue prints any value as JSON (indented) or YAML.
func printValue(w io.Writer, v any, format string) error {
	var (
		data []byte
		err  error
	)
	if format == "yaml" {
		data, err = yaml.Marshal(v)
	} else {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
