"""The commands that need no console run where textual is not installed (a GPU host with only
torch): building the parser must not import textual."""
import subprocess
import sys


def test_the_parser_and_the_data_and_baselines_commands_do_not_import_textual():
    code = ("import sys, befair_tui.cli as cli\n"
            "cli.build_parser()\n"
            "import befair_tui.cli.data, befair_tui.cli.baselines\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
