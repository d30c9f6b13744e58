// kael.autograd's graph printers: explain (an indented walk of the graph behind a tensor) and
// graphviz (the same graph in the dot language).
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kael/autograd/autograd.h"

#include "kael/autograd/saved_args.h"

namespace kael::autograd {

void describe_saved(std::string& out, const char* name, const SavedVariable& v) {
  if (!v.defined()) return;
  if (!out.empty()) out += ' ';
  out += name;
  out += '=';
  out += v.description();
}

void describe_sizes(std::string& out, const char* name, IntArrayRef sizes) {
  if (!out.empty()) out += ' ';
  out += name;
  out += ".sizes=";
  out += shape_str(sizes);
}

void describe_list(std::string& out, const char* name, std::size_t size) {
  if (!out.empty()) out += ' ';
  out += name;
  out += "=[";
  out += std::to_string(size);
  out += " tensors]";
}

// ------------------------------------------------------------------ explain / graphviz

namespace {
template <typename F>
void walk(const Tensor& t, F visit) {
  std::shared_ptr<Node> start = grad_fn(t);
  if (!start) {
    Edge e = gradient_edge(t);
    start = e.function;
  }
  if (!start) return;
  std::vector<std::pair<Node*, int>> stack{{start.get(), 0}};
  std::unordered_set<Node*> seen{start.get()};
  while (!stack.empty()) {
    auto [n, depth] = stack.back();
    stack.pop_back();
    visit(*n, depth);
    const auto& edges = n->next_edges();
    for (auto it = edges.rbegin(); it != edges.rend(); ++it)
      if (it->is_valid() && seen.insert(it->function.get()).second) stack.emplace_back(it->function.get(), depth + 1);
  }
}
}  // namespace

std::string explain(const Tensor& t) {
  std::ostringstream os;
  if (!requires_grad(t)) return "tensor does not require grad (no graph)\n";
  walk(t, [&](const Node& n, int depth) {
    os << std::string(2 * depth, ' ') << n.name();
    if (!n.input_metadata().empty()) {
      os << " (grad " << shape_str(n.input_metadata()[0].sizes) << ")";
    }
    const std::string saved = n.saved_description();
    if (!saved.empty()) os << " saved: " << saved;
    if (const auto* acc = dynamic_cast<const AccumulateGrad*>(&n)) os << " -> leaf " << shape_str(acc->variable().sizes());
    os << "\n";
  });
  return os.str();
}

std::string graphviz(const Tensor& t) {
  std::ostringstream os;
  os << "digraph autograd {\n  node [shape=box];\n";
  walk(t, [&](const Node& n, int) {
    os << "  n" << static_cast<const void*>(&n) << " [label=\"" << n.name();
    const std::string saved = n.saved_description();
    if (!saved.empty()) os << "\\n" << saved;
    os << "\"];\n";
    for (const Edge& e : n.next_edges())
      if (e.is_valid())
        os << "  n" << static_cast<const void*>(&n) << " -> n" << static_cast<const void*>(e.function.get()) << ";\n";
  });
  os << "}\n";
  return os.str();
}

}  // namespace kael::autograd
