//===- Completion.cpp - completing names in .rlhf algorithms --------------===//
//
// The context comes from the text (the cursor is usually in a statement
// that does not parse yet): after `x.`, inside the parentheses of a call,
// or at the start of a value. What `x` is comes from the syntax tree, of
// the document or, when it does not parse, of the document with the line
// being typed blanked out. The lists are Builtins.cpp's tables. In a
// function (`fn`): `let` and `return` at the start of a statement, values
// elsewhere in its body, the types of parameters and results in its header,
// and the trained model's outputs after `model.` in a loss.
//
//===----------------------------------------------------------------------===//

#include "Features.h"
#include "Functions.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Properties.h"
#include "rlhfc/Frontend/Units.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;
using llvm::formatv;

namespace {

/// The algorithm whose declaration contains `offset`.
const ast::AlgorithmDecl *enclosingAlgorithm(const Document &doc,
                                             size_t offset) {
  const ast::Module *m = doc.getMainModule();
  if (!m)
    return nullptr;
  const SourceText &text = doc.getText();
  for (const auto &a : m->algorithms) {
    size_t begin = text.previousWordStart(
        text.offsetOf(mlir::cast<mlir::FileLineColLoc>(a->loc)));
    if (begin <= offset && offset < text.itemEnd(begin))
      return a.get();
  }
  return nullptr;
}

/// The `(` of the innermost call the offset is inside, if any.
std::optional<size_t> openParen(const SourceText &text, size_t offset) {
  std::vector<size_t> open;
  llvm::StringRef src = text.text();
  text.scanCode(0, offset, [&](size_t i, char c) {
    if (c == '(' || c == '[' || c == '{')
      open.push_back(i);
    else if ((c == ')' || c == ']' || c == '}') && !open.empty())
      open.pop_back();
    else if (c == ';') // a statement ends whatever it left open
      while (!open.empty() && src[open.back()] != '{')
        open.pop_back();
    return true;
  });
  if (open.empty() || src[open.back()] != '(')
    return std::nullopt;
  return open.back();
}

/// The properties set in the block that opens at `brace`: each item's
/// first name, but the one being typed at `word`.
llvm::StringSet<> givenProperties(const SourceText &text, size_t brace,
                                  size_t word) {
  llvm::StringSet<> given;
  bool itemStart = true;
  int depth = 0;
  text.scanCode(brace + 1, text.text().size(), [&](size_t i, char c) {
    if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth < 0)
        return false; // the block's end
    } else if (c == ';' && depth == 0) {
      itemStart = true;
    } else if (itemStart && isNameChar(c)) {
      if (i != word)
        given.insert(text.nameAt(i));
      itemStart = false;
    }
    return true;
  });
  return given;
}

/// The names already given as `name = ...` in the arguments [begin, end).
llvm::StringSet<> namedArgs(const SourceText &text, size_t begin, size_t end) {
  llvm::StringSet<> names;
  int depth = 0;
  text.scanCode(begin, end, [&](size_t i, char c) {
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == '=' && depth == 0)
      names.insert(text.text().slice(text.previousWordStart(i), i).rtrim());
    return true;
  });
  return names;
}

/// Sort text keeping a table's order within a group: "0" + "07".
std::string order(char group, size_t index) {
  return formatv("{0}{1,0+2}", group, index).str();
}

class Completer {
public:
  Completer(Document &doc, const Document &scope, size_t offset)
      : doc(doc), scope(scope), text(doc.getText()), src(text.text()),
        offset(offset), alg(enclosingAlgorithm(scope, offset)),
        fn(enclosingFunction(scope, offset)) {}

  mlsp::CompletionList run() {
    size_t word = text.wordStart(offset);
    // In a declaration's block: its properties, or a property's value.
    if (!alg && !fn)
      if (std::optional<size_t> brace = text.openBrace(offset)) {
        llvm::StringRef keyword = text.declarationKeyword(*brace);
        std::vector<PropSpec> props = declarationProps(keyword);
        if (!props.empty()) {
          properties(keyword, props, *brace, word);
          return std::move(list);
        }
      }
    if (word > 0 && src[word - 1] == '.') {
      size_t dot = word - 1;
      llvm::StringRef base = src.slice(text.wordStart(dot), dot);
      if (fn) {
        if (base == "model" && isLoss(*fn))
          outputs();
      } else if (!base.empty() && !llvm::isDigit(base.front())) { // not `1.5`
        member(base);
      }
      return std::move(list);
    }
    if (fn && word > bodyBegin(text, *fn)) {
      fnBody(word);
      return std::move(list);
    }
    // A function's header, which need not parse yet.
    if ((!alg && types(word)) || fn)
      return std::move(list);
    std::optional<size_t> paren = openParen(text, offset);
    bool valueStart = previousChar(src, word) == '=';
    if (paren && !valueStart) {
      char before = previousChar(src, word);
      if (before == '(' || before == ',')
        namedArguments(*paren, word);
    }
    if (alg && (paren || valueStart || statementStart(word)))
      values(word);
    return std::move(list);
  }

private:
  void add(llvm::StringRef label, mlsp::CompletionItemKind kind,
           llvm::StringRef detail, llvm::StringRef sortText,
           llvm::StringRef insert = "", llvm::StringRef doc = "") {
    mlsp::CompletionItem item(label, kind, sortText);
    item.detail = detail.str();
    if (!insert.empty())
      item.insertText = insert.str();
    if (!doc.empty())
      item.documentation =
          mlsp::MarkupContent{mlsp::MarkupKind::Markdown, doc.str()};
    list.items.push_back(std::move(item));
  }

  /// At the beginning of a statement of the algorithm body.
  bool statementStart(size_t word) const {
    char c = previousChar(src, word);
    return c == ';' || c == '{' || c == '}' || c == ')';
  }

  const ast::Param *param(llvm::StringRef name) const {
    for (const ast::Param &p : alg->params)
      if (p.name == name)
        return &p;
    return nullptr;
  }

  /// After `base.`: the methods of a model, the fields of a dataset or of a
  /// result.
  void member(llvm::StringRef base) {
    const ast::Param *p = alg ? param(base) : nullptr;
    if (!alg || (p && p->type == "model")) {
      for (auto [i, m] : llvm::enumerate(allMethods())) {
        std::string doc = formatv("input: {0}", m.inputHelp);
        for (const SettingSpec &s : m.settings)
          doc += formatv("\n- `{0}`{1}", s.name, settingDefault(s));
        add(m.name, mlsp::CompletionItemKind::Method, m.summary, order('0', i),
            "", doc);
      }
      return;
    }
    // Fields: from every run of the algorithm, each name once.
    llvm::StringSet<> seen;
    for (const sema::Instance *in : scope.instancesOf(*alg)) {
      const RecordType *rec = nullptr;
      if (p && p->type == "dataset")
        rec = in->dataset ? &in->dataset->type : nullptr;
      for (const sema::Node &n : in->nodes)
        if (!p && n.name == base)
          rec = &n.result;
      for (const Field &f : rec ? rec->fields : std::vector<Field>{})
        if (seen.insert(f.name).second)
          add(f.name, mlsp::CompletionItemKind::Field, f.type.str(),
              order('0', seen.size()));
    }
  }

  void setting(const SettingSpec &s, size_t index) {
    std::string detail =
        s.required   ? std::string(s.text ? "required setting, a string in "
                                              "double quotes"
                                          : "required setting")
        : s.optional ? std::string("optional setting")
                     : "setting, default " + formatNumber(s.fallback);
    if (*s.help)
      detail += ": " + std::string(s.help);
    add(s.name, mlsp::CompletionItemKind::Property, detail, order('0', index),
        std::string(s.name) + (s.text ? " = \"" : " = "));
  }

  /// Inside `callee(`: its named settings and inputs not given yet.
  void namedArguments(size_t paren, size_t word) {
    size_t end = paren;
    while (end > 0 && llvm::isSpace(src[end - 1]))
      --end;
    size_t begin = text.wordStart(end);
    llvm::StringRef callee = src.slice(begin, end);
    bool isMethod = begin > 0 && src[begin - 1] == '.';
    llvm::StringSet<> given = namedArgs(text, paren + 1, word);
    size_t index = 0;
    if (begin > 0 && src[begin - 1] == '@' && callee == "place") {
      for (const PropSpec &p : kPlaceSettings)
        if (!given.count(p.name))
          add(p.name, mlsp::CompletionItemKind::Property, p.summary,
              order('0', index++), std::string(p.name) + " = ");
      return;
    }
    if (const MethodSpec *m = isMethod ? lookupMethod(callee) : nullptr) {
      for (const SettingSpec &s : m->settings)
        if (!given.count(s.name))
          setting(s, index++);
    } else if (const ControlSpec *c =
                   isMethod ? nullptr : lookupControl(callee)) {
      for (const SettingSpec &s : c->params)
        if (!given.count(s.name))
          setting(s, index++);
    } else if (const ast::FnDecl *f =
                   isMethod ? nullptr : scope.lookupFunction(callee)) {
      for (const ast::FnParam &p : f->params)
        if (!given.count(p.name))
          add(p.name, mlsp::CompletionItemKind::Property,
              "parameter: " + paramTypeText(p), order('0', index++),
              p.name + " = ");
    } else if (const BuiltinSpec *b =
                   isMethod ? nullptr : lookupBuiltin(callee)) {
      for (const InputSpec &in : b->inputs)
        if (!given.count(in.name))
          add(in.name, mlsp::CompletionItemKind::Property,
              "input: " + tensorKindNoun(in.kind).str(), order('0', index++),
              in.name + " = ");
      for (const SettingSpec &s : b->settings)
        if (!given.count(s.name))
          setting(s, index++);
    } else if (const ast::AlgorithmDecl *a = scope.lookupAlgorithm(callee);
               a && !isMethod &&
               src.slice(text.previousWordStart(begin), begin).trim() ==
                   "run") {
      for (const ast::Param &p : a->params)
        if (!given.count(p.name))
          add(p.name, mlsp::CompletionItemKind::Property,
              "parameter: " + p.type, order('0', index++), p.name + " = ");
    }
  }

  /// In the block of a `keyword` declaration opened at `brace`: at the
  /// start of an item, the properties not set yet; after `name =`, the
  /// values of the properties that name something.
  void properties(llvm::StringRef keyword, llvm::ArrayRef<PropSpec> props,
                  size_t brace, size_t word) {
    char before = previousChar(src, word);
    if (before == '{' || before == ';') {
      llvm::StringSet<> given = givenProperties(text, brace, word);
      // `name : base {` takes what it does not set from its base (a model
      // from its arch).
      const bool based = text.declarationHasBase(brace);
      for (auto [i, p] : llvm::enumerate(props)) {
        if (given.count(p.name))
          continue;
        const bool required = p.required && !based;
        std::string insert = p.type == PropType::Flag ? std::string(p.name)
                             : p.type == PropType::String
                                 ? std::string(p.name) + " = \""
                                 : std::string(p.name) + " = ";
        add(p.name, mlsp::CompletionItemKind::Property,
            (required ? "required: " : "") + std::string(p.summary),
            order('0', i), insert);
      }
      return;
    }
    if (before != '=' || openParen(text, offset))
      return;
    // The name before the `=` that ends right before the word.
    size_t keyEnd = src.rfind('=', word);
    while (keyEnd > 0 && llvm::isSpace(src[keyEnd - 1]))
      --keyEnd;
    llvm::StringRef key = src.slice(text.wordStart(keyEnd), keyEnd);
    // The program's declarations of a kind, from the syntax: a run names
    // what its own file declares, checked or not.
    auto declared = [&](ast::EntityKind kind, llvm::StringRef what) {
      const ast::Module *m = scope.getMainModule();
      if (!m)
        return;
      size_t index = 0;
      for (const auto &d : m->entities)
        if (d->kind == kind) {
          std::string detail = what.str();
          for (const ast::Property &p : d->props)
            if (p.name == "path" && p.value &&
                p.value->kind == ast::Expr::Kind::String)
              detail += " \"" + p.value->text + "\"";
          add(d->name, mlsp::CompletionItemKind::Variable, detail,
              order('0', index++));
        }
    };
    if (keyword == "run" && key == "eval")
      declared(ast::EntityKind::Dataset, "dataset");
    else if (keyword == "run" && key == "cluster")
      declared(ast::EntityKind::Cluster, "cluster");
    else if (keyword == "model" && key == "head") {
      add("lm", mlsp::CompletionItemKind::EnumMember,
          "next-token logits (the default)", order('0', 0));
      add("value", mlsp::CompletionItemKind::EnumMember,
          "per-token values and a per-sequence score: critics and reward "
          "models",
          order('0', 1));
    } else if (keyword == "model" && key == "optimizer") {
      add("adam", mlsp::CompletionItemKind::Function,
          "Adam with decoupled weight decay: lr, beta1, beta2, eps, "
          "weight_decay, grad_clip, warmup_steps, schedule, min_lr, "
          "decay_steps",
          order('0', 0), "adam(");
      add("adamw", mlsp::CompletionItemKind::Function,
          "the same optimizer under PyTorch's name", order('0', 1), "adamw(");
    }
  }

  /// A value in the algorithm body: a parameter, an earlier result, or a
  /// built-in function.
  void values(size_t word) {
    for (const ast::Param &p : alg->params)
      add(p.name, mlsp::CompletionItemKind::Variable, p.type, "1" + p.name);
    for (const ast::Stmt &s : alg->body) {
      // Only statements that end before the cursor: not the one whose
      // result is being defined.
      auto loc = mlir::cast<mlir::FileLineColLoc>(s.loc);
      const SourceText &text = scope.getText();
      if (!s.target.empty() && text.itemEnd(text.offsetOf(loc)) <= word)
        add(s.target, mlsp::CompletionItemKind::Variable, "result",
            "1" + s.target);
    }
    for (const BuiltinSpec &b : allBuiltins())
      if (!scope.lookupFunction(b.name))
        add(b.name, mlsp::CompletionItemKind::Function, b.signature,
            std::string("2") + b.name, "", b.summary);
    // An argument of a call may be a coefficient the run adapts.
    if (openParen(text, offset))
      for (const ControlSpec &c : allControls())
        add(c.spec.name, mlsp::CompletionItemKind::Function, c.spec.signature,
            std::string("2") + c.spec.name, std::string(c.spec.name) + "(",
            c.spec.summary);
    functions();
  }

  /// The functions of the program and its imports, but the one being
  /// written (functions are inlined and cannot recurse), and in a function
  /// that is not a loss, the losses.
  void functions() {
    for (const auto &[name, f] : scope.getFunctions())
      if (f != fn && (!fn || isLoss(*fn) || !isLoss(*f)))
        add(name, mlsp::CompletionItemKind::Function, signatureOf(*f),
            "2" + name, "", docOf(scope, *f));
  }

  /// After `model.` in a loss.
  void outputs() {
    for (auto [i, m] : llvm::enumerate(modelOutputs()))
      add(m.name, mlsp::CompletionItemKind::Method,
          formatv("(seq) -> {0}, {1} head", m.shape, m.head).str(),
          order('0', i), "", m.summary);
  }

  /// In a function's body.
  void fnBody(size_t word) {
    char before = previousChar(src, word);
    if (before == ';' || before == '{') {
      add("let", mlsp::CompletionItemKind::Keyword, "let name = value;", "0let",
          "let ");
      add("return", mlsp::CompletionItemKind::Keyword, "return value;",
          "0return", "return ");
      return;
    }
    // `let x`: a new name.
    if (src.slice(text.previousWordStart(word), word).trim() == "let")
      return;
    std::optional<size_t> paren = openParen(text, offset);
    if (paren && (before == '(' || before == ','))
      namedArguments(*paren, word);
    fnValues(word);
  }

  /// After `name:` in the parameters or results of a function, or after
  /// `->`: the types, `loss` only for results. False elsewhere.
  bool types(size_t word) {
    auto endOfCode = [&](size_t i) {
      while (i > 0 && llvm::isSpace(src[i - 1]))
        --i;
      return i;
    };
    bool result = src.slice(0, endOfCode(word)).ends_with("->");
    if (!result) {
      std::optional<size_t> paren = openParen(text, offset);
      if (!paren || previousChar(src, word) != ':')
        return false;
      // `fn name(` or `-> (`.
      size_t end = endOfCode(*paren), name = text.wordStart(end);
      result = src.slice(0, end).ends_with("->");
      if (!result &&
          (name == end ||
           src.slice(text.previousWordStart(name), name).trim() != "fn"))
        return false;
    }
    for (auto [i, t] : llvm::enumerate(fnTypes()))
      if (result || !t.result)
        add(t.name, mlsp::CompletionItemKind::TypeParameter,
            std::string(t.name) + t.shape, order('0', i), "", t.summary);
    return true;
  }

  /// A value in a function body: a parameter, an earlier let, `model` in a
  /// loss, a function or a primitive.
  void fnValues(size_t word) {
    for (const ast::FnParam &p : fn->params)
      add(p.name, mlsp::CompletionItemKind::Variable, paramTypeText(p),
          "1" + p.name);
    for (const ast::FnStmt &s : fn->body) {
      auto loc = mlir::cast<mlir::FileLineColLoc>(s.loc);
      if (s.kind == ast::FnStmt::Kind::Let &&
          scope.getText().offsetOf(loc) < word)
        add(s.name, mlsp::CompletionItemKind::Variable,
            "let = " + letValueText(scope, s), "1" + s.name);
    }
    if (isLoss(*fn))
      add("model", mlsp::CompletionItemKind::Variable,
          "the model this loss trains", "1model", "",
          "its outputs: `model.logprobs(seq)`, `model.entropy(seq)` (an lm "
          "head), `model.values(seq)`, `model.score(seq)` (a value head)");
    for (const FnPrimitiveSpec &p : allFnPrimitives())
      if (!scope.lookupFunction(p.name))
        add(p.name, mlsp::CompletionItemKind::Function, p.signature,
            std::string("2") + p.name, "", p.summary);
    functions();
  }

  Document &doc;
  const Document &scope;
  const SourceText &text;
  llvm::StringRef src;
  size_t offset;
  const ast::AlgorithmDecl *alg;
  const ast::FnDecl *fn;
  mlsp::CompletionList list;
};

} // namespace

mlsp::CompletionList rlhfc::lsp::complete(Document &doc,
                                          const mlsp::Position &pos) {
  const SourceText &text = doc.getText();
  size_t offset = text.offsetOf(pos);
  if (text.inCommentOrString(offset))
    return {};
  if (doc.getMainModule())
    return Completer(doc, doc, offset).run();
  // A half-typed statement does not parse; blanking its line (offsets stay
  // the same) usually leaves a program that does, for the names around it.
  std::string blanked = text.text().str();
  size_t lineBegin = blanked.rfind('\n', offset ? offset - 1 : 0);
  lineBegin = lineBegin == std::string::npos || offset == 0 ? 0 : lineBegin + 1;
  for (size_t i = lineBegin; i < blanked.size() && blanked[i] != '\n'; ++i)
    blanked[i] = ' ';
  Document scope(doc.getContext(), doc.getOptions(), doc.getURI(), blanked);
  return Completer(doc, scope, offset).run();
}
