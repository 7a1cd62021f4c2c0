"""A minimal command agent for the tests: it speaks mini-swe-agent's text protocol with
the endpoint in OPENAI_BASE_URL (the openai client reads OPENAI_BASE_URL and
OPENAI_API_KEY itself), runs each command it is given, and stops at the end-of-task word
or after --steps requests (exit 3)."""

import argparse
import os
import re
import subprocess
import sys

from openai import OpenAI

parser = argparse.ArgumentParser()
parser.add_argument("task_file")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--look", action="append", default=[], help="a host path a red-team probe names; unused")
args = parser.parse_args()

client = OpenAI(max_retries=0)
messages = [{"role": "system", "content": "Answer with one shell command in a mswea_bash_command block."},
            {"role": "user", "content": open(args.task_file).read()}]
for step in range(args.steps):
    reply = client.chat.completions.create(model=os.environ["LLM_MODEL"], messages=messages)
    text = reply.choices[0].message.content
    messages.append({"role": "assistant", "content": text})
    found = re.search(r"```mswea_bash_command\s*\n(.*?)\n```", text, re.DOTALL)
    command = found.group(1) if found else "true"
    if command.strip() == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT":
        sys.exit(0)
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    print(f"$ {command}\n{done.stdout}{done.stderr}", flush=True)
    messages.append({"role": "user", "content": f"returncode {done.returncode}\n{done.stdout}{done.stderr}"})
sys.exit(3)
