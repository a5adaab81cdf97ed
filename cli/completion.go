package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newCompletionCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script of kubectl-task for bash, zsh or fish (cobra's), to source or
to install where the shell loads completions. kubectl (1.26 and later) completes
'kubectl task ...' as well when an executable kubectl_complete-task on PATH runs
'kubectl-task __complete "$@"'.`,
		Example: `  source <(kubectl task completion bash)
  kubectl task completion zsh > "${fpath[1]}/_kubectl-task"
  kubectl task completion fish > ~/.config/fish/completions/kubectl-task.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), o.Streams.Out
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return fmt.Errorf("unknown shell %q", args[0])
		},
	}
}
