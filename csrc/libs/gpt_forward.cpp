// The binding of kael_gpt's forward (Note [GPT] in kael/gpt/gpt.h).
#include <Python.h>

#include <vector>

namespace kael::python {

void append_gpt_forward_functions(std::vector<PyMethodDef>& /*out*/) {}

}  // namespace kael::python
