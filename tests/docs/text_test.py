#!/usr/bin/env python3
"""The documents (README.md, docs/*.md) describe pvdisk as it is and stay
inside the repository:

- "session" appears only as the FUSE protocol's own word, in the phrasings
  of ALLOWED_SESSION (the protocol layer's Session class and its files,
  libfuse's fuse_session_* calls, the fuse_session fuzz target); no issue
  numbers;
- no link leaves the repository (no http(s) address, nothing above the
  repository's root, no pointer to the design folder outside it) and every
  relative link names a file that exists;
- README.md is at most 300 lines and shows `make run` and `make test` in
  its first 40; docs/PERFORMANCE.md is at most 300 lines;
- the code (every text file in src/, tests/, bench/, examples/, scripts/,
  and the top Makefile and CMakeLists.txt) states contracts and reasons, not
  where they came from: no issue or defect numbers, no work-session talk
  ("this session", "the twelfth session"), no "the issue's reproduction" or
  "before the fix". There "session" is also the FUSE protocol's identifier
  (Session, session_, fuse_session), so only the phrasings of CODE_HISTORY
  count.

Usage: text_test.py [PVDISK_DIR] (the argument is ignored; every docs test
takes it)."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402

# Every use of "session" must lie inside one of these phrasings.
ALLOWED_SESSION = [
    r"`session\.\{h,cc\}`",             # src/fuse/protocol/session.{h,cc}
    r"`src/fuse/protocol/session\.(?:h|cc)`",
    r"the `Session`",                   # its class
    r"`Session::[A-Za-z]+`",            # its methods
    r"`fuse_session_(?:mount|unmount)`",  # libfuse's mount calls
    r"`fuse_session`",                  # the fuzz target of the FUSE layer
]
ISSUE = re.compile(r"\bissues?\s*#?\s*[0-9]", re.IGNORECASE)
SESSION = re.compile(r"session", re.IGNORECASE)
# History talk in code: an issue or defect number, a work session named by
# its place in a sequence, or "the issue"/"the fix" as the reason for code.
CODE_HISTORY = re.compile(
    r"\bissues?\s*#?\s*[0-9]|\bdefect\s*#?\s*[0-9]"
    r"|\b(?:this|that|previous|earlier|last|next|later|[a-z]+th)\s+session\b"
    r"|\bsession\s+#?[0-9]|\bthe issue\b|\bissue's\b|\bbefore the fix\b",
    re.IGNORECASE)
CODE_DIRS = ["src", "tests", "bench", "examples", "scripts"]
CODE_FILES = ["Makefile", "CMakeLists.txt"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"https?://|\.\./shared|shared/(?:design|reference)/")


def disallowed_sessions(line):
    """Spans of "session" in line not covered by an allowed phrasing."""
    covered = []
    for pattern in ALLOWED_SESSION:
        covered += [m.span() for m in re.finditer(pattern, line)]
    return [m.group(0) for m in SESSION.finditer(line)
            if not any(a <= m.start() and m.end() <= b for a, b in covered)]


def code_files():
    """Every text file of the code (fuzz corpora are inputs, not text)."""
    found = [os.path.join(docslib.REPO, name) for name in CODE_FILES]
    for top in CODE_DIRS:
        for folder, subfolders, files in os.walk(
                os.path.join(docslib.REPO, top)):
            subfolders[:] = sorted(d for d in subfolders if d != "corpus")
            found += [os.path.join(folder, f) for f in sorted(files)]
    return [path for path in found
            if os.path.isfile(path)
            and os.path.realpath(path) != os.path.realpath(__file__)]


def text_of(path):
    """The file's text, or None for a binary file."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class TextTest(unittest.TestCase):

    def test_session_only_as_the_fuse_protocol_word_and_no_issue_numbers(self):
        bad = []
        for path in docslib.documents():
            for n, line in enumerate(docslib.read(path).split("\n"), 1):
                where = "%s:%d: %s" % (docslib.relative(path), n, line.strip())
                if disallowed_sessions(line):
                    bad.append("session: " + where)
                if ISSUE.search(line):
                    bad.append("issue number: " + where)
        self.assertEqual(bad, [], "\n".join(bad))

    def test_code_states_contracts_not_history(self):
        bad = []
        checked = 0
        for path in code_files():
            text = text_of(path)
            if text is None:
                continue
            checked += 1
            for n, line in enumerate(text.split("\n"), 1):
                if CODE_HISTORY.search(line):
                    bad.append("%s:%d: %s" % (docslib.relative(path), n,
                                              line.strip()))
        self.assertGreater(checked, 100, "the code's files were not found")
        self.assertEqual(bad, [], "history in the code:\n" + "\n".join(bad))

    def test_the_checker_catches_what_it_must(self):
        # The patterns themselves: a work-session phrase and an issue number
        # are caught, the protocol's phrasings are not.
        self.assertTrue(disallowed_sessions("measured this session"))
        self.assertTrue(disallowed_sessions("(the twelfth session)"))
        self.assertTrue(ISSUE.search("as issue 12 asks"))
        self.assertTrue(ISSUE.search("(issues 6 and 12)"))
        self.assertFalse(disallowed_sessions(
            "`session.{h,cc}`: INIT, and the `Session` answers"))
        self.assertFalse(disallowed_sessions("`fuse_session_mount` calls"))
        # In code: history is caught, the protocol's identifiers are not.
        for history in ["// (issue 10, defect 3): on", "# issue #7",
                        "// measured this session", "(the twelfth session)",
                        "// The issue's reproduction:", "Before the fix, it",
                        "// defect 2: 64 readers"]:
            self.assertTrue(CODE_HISTORY.search(history), history)
        for code in ["session_->Process(raw);", "protocol::SessionOptions o;",
                     "fuse_session_mount(se, path)", "class Session {",
                     "// issues a full fence", "// the issued requests"]:
            self.assertFalse(CODE_HISTORY.search(code), code)

    def test_no_link_leaves_the_repository(self):
        bad = []
        for path in docslib.documents():
            text = docslib.read(path)
            for n, line in enumerate(text.split("\n"), 1):
                if OUTSIDE.search(line):
                    bad.append("%s:%d: points outside: %s" % (
                        docslib.relative(path), n, line.strip()))
                for target in LINK.findall(line):
                    if target.startswith("#"):
                        continue
                    file_part = target.split("#", 1)[0]
                    resolved = os.path.realpath(os.path.join(
                        os.path.dirname(path), file_part))
                    if not resolved.startswith(docslib.REPO + os.sep):
                        bad.append("%s:%d: link outside the repository: %s" % (
                            docslib.relative(path), n, target))
                    elif not os.path.exists(resolved):
                        bad.append("%s:%d: link to a missing file: %s" % (
                            docslib.relative(path), n, target))
        self.assertEqual(bad, [], "\n".join(bad))

    def test_sizes_and_the_two_commands_up_front(self):
        readme = docslib.read(os.path.join(docslib.REPO,
                                           "README.md")).split("\n")
        self.assertLessEqual(len(readme), 300, "README.md is too long")
        head = "\n".join(readme[:40])
        self.assertIn("make run", head)
        self.assertIn("make test", head)
        perf = docslib.read(os.path.join(docslib.REPO, "docs",
                                         "PERFORMANCE.md")).split("\n")
        self.assertLessEqual(len(perf), 300, "docs/PERFORMANCE.md is too long")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
