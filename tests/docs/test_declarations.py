"""No dead declaration (issue 67): every function a product header declares is defined somewhere
and used somewhere beside its declaration and its definition. Seven such declarations had
survived the changes that stopped using them (IsComplex, LoadServerConfig, PhaseLabel, ...).

The lint reads the code as text, the way a reader greps it, with comments and string literals
taken out:
- a declaration is a function's signature ending in `;` at namespace or class scope of a header
  under agent/, common/, server/ or oplib/ (not inside a function body); constructors,
  destructors, operators, `= default` / `= delete` and overrides (the framework calls them) are
  left out, and a pure virtual one (`= 0`) needs no definition;
- a definition is a signature that runs to `{` before any `;`, at the start of a line, or at a
  class member's indent;
- a use is any other occurrence of the name as a word in the C++ or the Python of the
  repository (the Python package calls the C API through ctypes).
A name shared by two functions counts for both: the lint misses a dead overload of a live name,
never reports a live function."""
import bisect
import os
import re
import subprocess
import unittest
from collections import Counter

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PRODUCT = ("agent/", "common/", "server/", "oplib/")
CODE = re.compile(r"\.(cc|h|inc|c|cu|py)$")

_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
# What opens a scope whose members are declarations (anything else opens a body).
_SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{}()]*$|extern\s*\"\"\s*$")
_DECLARATION = re.compile(
    r"(?:(?<=[;{}:])|^)\s*"
    r"((?:(?:static|virtual|inline|explicit|constexpr|friend|extern|\[\[nodiscard\]\]|"
    r"PARITY_\w+)\s+)*(?:const\s+)?[A-Za-z_][\w:<>,\s\*&]*?[\s\*&>])"  # return type
    r"(~?[A-Za-z_]\w*)\s*"  # name
    r"\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)"  # parameters (one level of parentheses)
    r"((?:\s*(?:const|noexcept|override|final|&|&&|[A-Z_]+\([^)]*\)))*)"  # qualifiers
    r"\s*(=\s*(?:0|default|delete))?\s*;", re.M)
_NOT_A_RETURN_TYPE = re.compile(r"\b(return|using|typedef|new|delete|throw|case|else)\b")
_DEFINITION_AT_LINE_START = re.compile(r"^[A-Za-z_][^;{}\n]*?(?:\b|::)(~?[A-Za-z_]\w*)\s*\(", re.M)
_DEFINITION_IN_CLASS = re.compile(
    r"^[ ]{2,4}(?!(?:if|for|while|switch|return|else|do|case)\b)"
    r"[A-Za-z_][^;{}\n]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)[^;{}]*\{", re.M)
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def strip_comments(text):
    text = _STRING.sub('""', text)
    text = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _LINE_COMMENT.sub("", text)


def function_bodies(text):
    """The outermost bodies (functions, initialisers) of `text`, as sorted (open, close) pairs."""
    spans, stack, head_start = [], [], 0
    for i, c in enumerate(text):
        if c == "{":
            in_body = any(kind == "body" for kind, _ in stack)
            scope = not in_body and _SCOPE.search(text[head_start:i])
            stack.append(("scope" if scope else "body", i))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, opened = stack.pop()
                if kind == "body" and not any(k == "body" for k, _ in stack):
                    spans.append((opened, i))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return sorted(spans)


def declarations(path, text):
    """(path, line, name, pure) for each function `text` declares at namespace or class scope."""
    classes = set(re.findall(r"\b(?:class|struct)\s+(\w+)", text))
    bodies = function_bodies(text)
    opens = [o for o, _ in bodies]
    found = []
    for m in _DECLARATION.finditer(text):
        returns, name, qualifiers, assigned = m.group(1), m.group(2), m.group(4), m.group(5)
        if name.startswith("~") or name == "operator" or name in classes or name.isupper():
            continue
        if _NOT_A_RETURN_TYPE.search(returns) or returns.strip() in ("", "const"):
            continue
        if assigned and ("default" in assigned or "delete" in assigned):
            continue
        if "override" in qualifiers or "final" in qualifiers:
            continue
        k = bisect.bisect_right(opens, m.start(2)) - 1
        if k >= 0 and bodies[k][0] < m.start(2) <= bodies[k][1]:
            continue  # a local variable built with arguments, not a declaration
        found.append((path, text.count("\n", 0, m.start(2)) + 1, name, bool(assigned)))
    return found


def definitions(text):
    names = Counter()
    for m in _DEFINITION_AT_LINE_START.finditer(text):
        rest = text[m.end():m.end() + 2000]
        brace, semicolon = rest.find("{"), rest.find(";")
        if brace != -1 and (semicolon == -1 or brace < semicolon):
            names[m.group(1)] += 1
    names.update(m.group(1) for m in _DEFINITION_IN_CLASS.finditer(text))
    return names


def dead_declarations(sources):
    """sources: {repository path: text}. Returns one line per declaration nothing defines or uses."""
    cpp = {p: strip_comments(t) for p, t in sources.items() if not p.endswith(".py")}
    declared = [d for p, t in cpp.items() if p.startswith(PRODUCT) and p.endswith(".h")
                for d in declarations(p, t)]
    words, defined = Counter(), Counter()
    for path, text in cpp.items():
        words.update(_WORD.findall(text))
        defined.update(definitions(text))
    for path, text in sources.items():
        if path.endswith(".py"):
            words.update(_WORD.findall(text))
    declared_count = Counter(name for _, _, name, _ in declared)
    problems = []
    for path, line, name, pure in declared:
        if not pure and defined[name] == 0:
            problems.append(f"{path}:{line}: {name}: declared, defined nowhere")
        elif words[name] - declared_count[name] - defined[name] <= 0:
            problems.append(f"{path}:{line}: {name}: declared and defined, used nowhere")
    return problems


def repository_sources():
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    sources = {}
    for name in files:
        full = os.path.join(ROOT, name)
        if CODE.search(name) and not name.startswith("build") and "/build/" not in name and \
                os.path.isfile(full):
            try:
                with open(full, encoding="utf-8") as f:
                    sources[name] = f.read()
            except UnicodeDecodeError:
                pass
    return sources


class DeclarationsTest(unittest.TestCase):
    def test_every_declared_function_is_defined_and_used(self):
        problems = dead_declarations(repository_sources())
        self.assertEqual(problems, [], "\n".join(problems))

    def test_the_lint_finds_dead_and_undefined_declarations_and_nothing_live(self):
        header = """
namespace parity::common {
// Unused(int) in a comment is no use.
bool Unused(int x);
bool Undefined(int x);
bool Live(int x);
class Widget {
 public:
  Widget(int size);
  virtual ~Widget() = default;
  virtual void Hook() = 0;
  void OnDone() override;
  int size() const { return size_; }
  void Member(const std::string& s) const;
 private:
  void Inline() {
    absl::MutexLock lock(&mu_);
  }
  int size_ ABSL_GUARDED_BY(mu_);
};
}  // namespace parity::common
"""
        source = """
bool Unused(int x) { return x > 0; }
bool Live(int x) {
  return x > 1;
}
void Widget::Member(const std::string& s) const {
  if (Live(2)) Hook();
  const char* s = "Undefined(3)";
}
"""
        # (Paths built from parts, or the path lint would read this file as naming them.)
        h, cc = "common/" + "w.h", "common/" + "w.cc"
        problems = dead_declarations({h: header, cc: source})
        self.assertEqual(problems, [
            f"{h}:4: Unused: declared and defined, used nowhere",
            f"{h}:5: Undefined: declared, defined nowhere",
            f"{h}:14: Member: declared and defined, used nowhere",
        ])
        # Used from the Python package (ctypes) counts.
        problems = dead_declarations({h: header, cc: source,
                                      "python/" + "x.py": "lib.Unused(1)\nlib.Member\n"})
        self.assertEqual(problems, [f"{h}:5: Undefined: declared, defined nowhere"])

    def test_the_lint_reads_a_real_header_of_this_repository(self):
        # A sanity check on the parser: the transport's C API is found, each of its functions.
        with open(os.path.join(ROOT, "agent/include/parity/transport.h"), encoding="utf-8") as f:
            names = {d[2] for d in declarations("agent/include/parity/transport.h",
                                                strip_comments(f.read()))}
        self.assertIn("parity_session_close", names)
        self.assertIn("parity_session_flush", names)


if __name__ == "__main__":
    unittest.main(verbosity=2)
