package cli

import (
	"strings"
	"testing"
)

// TestOutputFormatWithABadTemplateSaysWhatIsWrongWithTheTemplate: -o jsonpath=... or
// go-template=... whose template does not parse is a known format with a bad template; the
// error names the template's problem, not "unknown output format" (which lists the very
// format the user typed).
func TestOutputFormatWithABadTemplateSaysWhatIsWrongWithTheTemplate(t *testing.T) {
	for _, format := range []string{"jsonpath={.items[", "go-template={{.x", "jsonpath"} {
		t.Run(format, func(t *testing.T) {
			f := newPrintFlags()
			*f.generic.OutputFormat = format
			_, err := f.toPrinter()
			if err == nil {
				t.Fatalf("-o %s accepted", format)
			}
			if strings.Contains(err.Error(), "unknown output format") {
				t.Errorf("-o %s: %v; want the template's own error", format, err)
			}
		})
	}
}
