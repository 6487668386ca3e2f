"""seed_stamps.py - what tools/mla-trace.py and tools/gqa-trace.py share: a seed's text read
from the command line (SEED OUT.cu), text put in at anchors of the seed's own text, each of
which must occur exactly once, and the copy written only when every anchor was found."""
import sys


class Stamper:
    def __init__(self, tool):
        self.tool = tool
        if len(sys.argv) != 3:
            sys.exit("usage: %s SEED OUT.cu" % tool)
        self.seed, self.out = sys.argv[1], sys.argv[2]
        try:
            self.src = open(self.seed, encoding="utf-8").read()
        except OSError as e:
            sys.exit("%s: cannot read %s: %s" % (tool, self.seed, e.strerror))

    def rep(self, old, new):
        """put new where old is: old must occur exactly once"""
        n = self.src.count(old)
        if n != 1:
            first = old.strip().splitlines()[0]
            sys.exit("%s: %s: the line '%s' occurs %d times where one was expected; "
                     "update the anchors of tools/%s to the seed" % (self.tool, self.seed, first, n, self.tool))
        self.src = self.src.replace(old, new)

    def write(self):
        try:
            open(self.out, "w", encoding="utf-8").write(self.src)
        except OSError as e:
            sys.exit("%s: cannot write %s: %s" % (self.tool, self.out, e.strerror))
