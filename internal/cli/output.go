package cli

import (
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

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
