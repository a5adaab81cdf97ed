package migrate_test

import (
	"flag"
	"strings"
	"testing"

	"example.com/task-operator/migrate"
)

// TestFlagValuesMigrateDoesNotTakeAreRefusedNamingTheFlag: a command line asking for no page,
// no rewrite in flight, a negative rate or no progress is refused naming the flag, where Run
// would quietly read a zero as its default; the defaults and real values pass.
func TestFlagValuesMigrateDoesNotTakeAreRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		refused string // the flag the refusal names; "" when accepted
	}{
		{nil, ""},
		{[]string{"--page-size", "10", "--concurrency", "1", "--qps", "0.5", "--progress-interval", "1s"}, ""},
		{[]string{"--page-size", "0"}, "--page-size"},
		{[]string{"--page-size", "-1"}, "--page-size"},
		{[]string{"--concurrency", "0"}, "--concurrency"},
		{[]string{"--concurrency", "-3"}, "--concurrency"},
		{[]string{"--qps", "-1"}, "--qps"},
		{[]string{"--progress-interval", "0s"}, "--progress-interval"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
			opts := migrate.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := opts.CheckFlags()
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.refused+" ")):
				t.Fatalf("error %v, want one naming %s", err, tc.refused)
			}
		})
	}
}
