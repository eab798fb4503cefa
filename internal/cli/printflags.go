package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// outputFlags are kubectl get's -o for hitl's objects: the formats of
// cli-runtime's PrintFlags (json, yaml, kyaml, name, go-template,
// go-template-file, template, templatefile, jsonpath, jsonpath-as-json,
// jsonpath-file), kubectl's custom-columns and custom-columns-file, and the
// command's own output for people: the default, "wide" where the command
// has one, and "markdown" where it renders one.
type outputFlags struct {
	print   *genericclioptions.PrintFlags
	columns *get.CustomColumnsPrintFlags
	// human names the command's own output in -o's help ("a table",
	// "the card"); wide says whether it has a wide form, markdown whether
	// it renders markdown (withMarkdown).
	human    string
	wide     bool
	markdown bool
}

func newOutputFlags(human string, wide bool) *outputFlags {
	return &outputFlags{
		print:   genericclioptions.NewPrintFlags("").WithTypeSetter(scheme()),
		columns: get.NewCustomColumnsPrintFlags(),
		human:   human, wide: wide,
	}
}

// withMarkdown lets -o markdown through, for a command that renders its
// object as markdown itself (isMarkdown).
func (f *outputFlags) withMarkdown() *outputFlags {
	f.markdown = true
	return f
}

// formats are the -o values, for help, errors and shell completion.
func (f *outputFlags) formats() []string {
	var out []string
	if f.wide {
		out = append(out, "wide")
	}
	if f.markdown {
		out = append(out, "markdown")
	}
	out = append(out, f.print.AllowedFormats()...)
	return append(out, f.columns.AllowedFormats()...)
}

func (f *outputFlags) addFlags(cmd *cobra.Command) {
	f.print.JSONYamlPrintFlags.AddFlags(cmd)
	f.print.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(f.print.OutputFormat, "output", "o", "",
		fmt.Sprintf("output format: empty for %s, or one of (%s); as kubectl get's", f.human, strings.Join(f.formats(), ", ")))
	cmd.Flags().BoolVar(&f.columns.NoHeaders, "no-headers", false, "with -o custom-columns: print no header line")
	f.print.OutputFlagSpecified = func() bool { return cmd.Flag("output").Changed }
	// As kubectl get completes -o: the format names (a template or a
	// column list follows one after "=").
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return f.formats(), cobra.ShellCompDirectiveNoFileComp
	})
}

// format is the -o value; a --template without -o means go-template, as
// in kubectl.
func (f *outputFlags) format() string {
	o := *f.print.OutputFormat
	if o == "" && *f.print.TemplatePrinterFlags.TemplateArgument != "" {
		return "go-template"
	}
	return o
}

// isHuman reports whether the command prints its own output.
func (f *outputFlags) isHuman() bool {
	o := f.format()
	return o == "" || (o == "wide" && f.wide)
}

// isWide reports whether -o wide was asked for.
func (f *outputFlags) isWide() bool { return f.wide && f.format() == "wide" }

// isMarkdown reports whether -o markdown was asked for, of a command that
// renders it.
func (f *outputFlags) isMarkdown() bool { return f.markdown && f.format() == "markdown" }

// validate checks -o by building its printer; the command's own formats
// need none.
func (f *outputFlags) validate() error {
	if f.isHuman() || f.isMarkdown() {
		return nil
	}
	_, err := f.printer()
	return err
}

// printer is the printer of a machine format.
func (f *outputFlags) printer() (printers.ResourcePrinter, error) {
	format := f.format()
	if p, err := f.print.ToPrinter(); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.columns.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	return nil, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s",
		format, strings.Join(f.formats(), ","))
}

// printObject prints a question, a reply or a list of them in the -o
// format, with the kinds set (on the items too) as kubectl prints them.
func (f *outputFlags) printObject(w io.Writer, obj runtime.Object) error {
	p, err := f.printer()
	if err != nil {
		return err
	}
	setKinds(obj)
	if meta.IsListType(obj) && f.format() == "name" {
		// The name printer takes no typed list: one name per item, as
		// kubectl get -o name prints.
		return meta.EachListItem(obj, func(item runtime.Object) error { return p.PrintObj(item, w) })
	}
	return p.PrintObj(obj, w)
}

// setKinds sets the apiVersion and kind of obj and, for a list, of its
// items: objects read with a typed client have them empty.
func setKinds(obj runtime.Object) {
	s := scheme()
	if gvk, err := apiutil.GVKForObject(obj, s); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	if !meta.IsListType(obj) {
		return
	}
	_ = meta.EachListItem(obj, func(item runtime.Object) error {
		if gvk, err := apiutil.GVKForObject(item, s); err == nil {
			item.GetObjectKind().SetGroupVersionKind(gvk)
		}
		return nil
	})
}
