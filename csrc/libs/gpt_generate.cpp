// The binding of kael_gpt's generate (Note [GPT] in kael/gpt/gpt.h).
#include <Python.h>

#include <vector>

namespace kael::python {

void append_gpt_generate_functions(std::vector<PyMethodDef>& /*out*/) {}

}  // namespace kael::python
