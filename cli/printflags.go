package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
)

// printFlags are kubectl's -o formats: cli-runtime's json, yaml, name, jsonpath and
// go-template, and kubectl's custom-columns. No -o means the command's own table.
type printFlags struct {
	generic *genericclioptions.PrintFlags
	columns *get.CustomColumnsPrintFlags
}

func newPrintFlags() *printFlags {
	return &printFlags{
		generic: genericclioptions.NewPrintFlags(""),
		columns: get.NewCustomColumnsPrintFlags(),
	}
}

func (f *printFlags) allowedFormats() []string {
	return append(f.generic.AllowedFormats(), f.columns.AllowedFormats()...)
}

func (f *printFlags) addFlags(cmd *cobra.Command) {
	f.generic.JSONYamlPrintFlags.AddFlags(cmd)
	f.generic.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(f.generic.OutputFormat, "output", "o", "",
		"Output format: "+strings.Join(f.allowedFormats(), "|")+". Empty: a table.")
}

// toPrinter is nil for the command's own table.
func (f *printFlags) toPrinter() (printers.ResourcePrinter, error) {
	format := *f.generic.OutputFormat
	if format == "" {
		return nil, nil
	}
	if strings.HasPrefix(format, "custom-columns") {
		if !strings.Contains(format, "=") {
			return nil, fmt.Errorf("-o %s needs columns, e.g. -o custom-columns=JOB:.job,OUTCOME:.outcome", format)
		}
		return f.columns.ToPrinter(format)
	}
	p, err := f.generic.ToPrinter()
	switch {
	case genericclioptions.IsNoCompatiblePrinterError(err):
		return nil, fmt.Errorf("-o %s: unknown output format (want one of %s)", format, strings.Join(f.allowedFormats(), ", "))
	case err != nil:
		// A known format whose template is missing or does not parse: its own error says why.
		return nil, fmt.Errorf("-o %s: %w", format, err)
	}
	return p, nil
}
