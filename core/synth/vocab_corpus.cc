// Training text for the toy BPE vocabulary: written for this project, a mix of plain English
// about memory and models and a little C++ and Python, so that merges cover common words,
// identifiers and punctuation. Changing it changes every synthetic vocabulary (and file hash).
#include <string_view>

#include "core/synth/vocab.h"

namespace moesplit::synth {
namespace {

constexpr std::string_view kCorpus = R"CORPUS(
The model reads its weights from memory for every token it writes. When the weights do not
fit in the cache, the speed of the machine is the speed of its memory, and nothing else.
A mixture of experts model has many small feed forward networks in each layer, and a router
that picks a few of them for every token. Only the chosen experts are read, so a model with
hundreds of billions of parameters can run at the speed of a much smaller one.
The router scores every expert, keeps the best ones, and weights their outputs. Some models
add a shared expert that every token uses, and some group the experts and pick the best groups
first. The attention layers are the same for every token and are small enough for the GPU.
We measure the time of each step, print the numbers, and compare them with what the memory
could deliver. If the kernel is slower than the memory, the kernel is the problem to fix.
Tests check each part against a reference: the same input must give the same output, bit for
bit, on every machine. A test that sometimes fails is worse than no test at all.
The planner reads the topology of the machine: sockets, nodes, cores, caches and the GPU.
It places the experts of each layer on the node whose threads will read them, so that no
thread reads memory across the link between the sockets while it decodes a token.
This is a short story about a small team that wanted to run a large model on one server.
They wrote the code in small files, with short functions and clear names, and they wrote a
test for each function before they trusted it. When something was slow they measured it first.
When something was wrong they wrote the smallest example that showed the problem.
In the end the model ran, the tests passed, and the numbers were close to what the hardware
could do. They wrote down what they learned, and they went home early on Friday.

int main(int argc, char** argv) {
  std::vector<float> weights(n_rows * n_cols);
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* src = weights.data() + row * n_cols;
    QuantizeRow(type, src, dst + row * row_bytes, n_cols);
  }
  if (!status.ok()) return status.code();
  return 0;
}

struct Expert {
  int64_t id = 0;        // index of the expert in its layer
  float weight = 0.0f;   // router weight after normalization
};

static Status LoadModel(const std::string& path, Model* model) {
  MOESPLIT_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
  for (const auto& tensor : file->tensors()) {
    if (tensor.name.find("exps") != std::string::npos) model->experts.push_back(tensor);
  }
  return Status::Ok();
}

def softmax(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]

def route(scores, k):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return order[:k]

for layer in range(num_layers):
    hidden = attention(hidden, layer)
    experts = route(router(hidden, layer), top_k)
    hidden = hidden + sum(expert(hidden, e) for e in experts)
print("tokens per second:", tokens / seconds)

Numbers: 0 1 2 3 4 5 6 7 8 9 10 16 32 64 128 256 512 1024 2048 4096 7168 18432 129280.
Questions? Answers! Lists, commas; colons: quotes "like this" and 'like that' (in brackets).
)CORPUS";

}  // namespace

std::string_view TrainingCorpus() { return kCorpus; }

}  // namespace moesplit::synth
