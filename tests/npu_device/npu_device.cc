// A test accelerator on libtorch's PrivateUse1 backend, registered the way torch_npu registers
// the NPU: its own allocator, device guard (streams and events), and kernels for the
// PrivateUse1 dispatch key. Loaded into a training with torch.ops.load_library; tensors live on
// torch.device("privateuseone") (torch 1.13 has no rename_privateuse1_backend; torch_npu's
// tensors are "npu", the same backend renamed).
//
// What makes it an accelerator for the agent, honestly: its memory is not host memory the agent
// could read. Every allocation is a memfd mapped twice: the address tensors carry (data_ptr()) is
// mapped PROT_NONE, so any host read of it (an agent reading device memory directly) is a
// SIGSEGV; the device's own kernels work on the second, read-write mapping. Data leaves the
// device only through its copy kernels (copy_, _to_copy), as on a real NPU.
//
// Kernels: a boxed fallback for every op: the device tensors of the call become CPU tensors over
// their read-write mappings (no copy), the CPU kernel runs, and its results come back as device
// tensors (views and in-place results as views of the same device memory, fresh results copied
// into new device memory; an out= argument with no elements yet, as a composite's arange makes
// it, gets a CPU tensor for the kernel to grow, and is grown on the device with this device's
// resize_ and filled from it). So the device computes exactly what the CPU computes: a training on
// it is judged as the same training on the CPU. Mixing device tensors with CPU tensors of more
// than 0 dimensions is refused, as a real backend refuses it. Kernels run synchronously on the
// calling thread; streams and events are bookkept (the agent's snapshots record an event on the
// training's stream and the sender blocks its own stream on it): parity_test_npu::stats() counts
// them, and the copies out of the device.
//
// No default generator: random ops on the device draw from the CPU's, and the agent, which finds
// no generator for the device, sends no generator state: the server judges them by the
// random_property standard, saying why (docs/results.md).
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#if __has_include(<ATen/detail/AcceleratorHooksInterface.h>)
#include <ATen/detail/PrivateUse1HooksInterface.h>
#endif
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <sys/mman.h>
#include <torch/library.h>
#include <torch/version.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "common/torch/torch_pch.h"

namespace parity::test_npu {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

struct Stats {
  std::atomic<int64_t> allocations{0}, fallback_calls{0}, copies_to_host{0}, events_recorded{0},
      events_blocked{0}, stream_syncs{0};
  std::atomic<int64_t> bytes_to_host{0};  // what those copies to the host carried
} g_stats;

// ---- memory ------------------------------------------------------------------------------------

struct Block {
  char* device = nullptr;  // PROT_NONE: what tensors carry
  char* alias = nullptr;   // read-write: what the device's kernels use
  std::size_t size = 0;
};

std::mutex g_blocks_mu;
std::map<uintptr_t, Block>& Blocks() {  // by device address
  static auto* blocks = new std::map<uintptr_t, Block>();
  return *blocks;
}

// The read-write address of device address `p` (inside a live block).
char* AliasOf(const void* p) {
  if (p == nullptr) return nullptr;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_blocks_mu);
  auto it = Blocks().upper_bound(addr);
  TORCH_CHECK(it != Blocks().begin(), "parity_test_npu: ", p, " is not device memory");
  --it;
  const Block& b = it->second;
  TORCH_CHECK(addr < it->first + b.size || (addr == it->first && b.size == 0),
              "parity_test_npu: ", p, " is not device memory");
  return b.alias + (addr - it->first);
}

void FreeBlock(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_blocks_mu);
    Blocks().erase(reinterpret_cast<uintptr_t>(b->device));
  }
  ::munmap(b->device, b->size);
  ::munmap(b->alias, b->size);
  delete b;
}

// libtorch 2.3 made Allocator::allocate non-const and added copy_data (Allocator::clone's copy).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define PARITY_ALLOCATE_CONST
#define PARITY_ALLOCATOR_COPIES 1
#else
#define PARITY_ALLOCATE_CONST const
#define PARITY_ALLOCATOR_COPIES 0
#endif

class NpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) PARITY_ALLOCATE_CONST override {
    const c10::Device device(kNpu, 0);
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, device};
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t size = (n + page - 1) / page * page;
    const int fd = ::memfd_create("parity-test-npu", MFD_CLOEXEC);
    TORCH_CHECK(fd >= 0, "parity_test_npu: memfd_create failed: ", std::strerror(errno));
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      ::close(fd);
      TORCH_CHECK(false, "parity_test_npu: out of device memory (", size, " bytes)");
    }
    auto* b = new Block;
    b->size = size;
    b->alias = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    b->device = static_cast<char*>(::mmap(nullptr, size, PROT_NONE, MAP_SHARED, fd, 0));
    ::close(fd);
    if (b->alias == MAP_FAILED || b->device == MAP_FAILED) {
      if (b->alias != MAP_FAILED) ::munmap(b->alias, size);
      if (b->device != MAP_FAILED) ::munmap(b->device, size);
      delete b;
      TORCH_CHECK(false, "parity_test_npu: out of device memory (", size, " bytes)");
    }
    {
      std::lock_guard<std::mutex> lock(g_blocks_mu);
      Blocks()[reinterpret_cast<uintptr_t>(b->device)] = *b;
    }
    g_stats.allocations++;
    return {b->device, b, &FreeBlock, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
#if PARITY_ALLOCATOR_COPIES
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(AliasOf(dest), AliasOf(src), count);
  }
#endif
};

NpuAllocator g_allocator;

// ---- streams and events ------------------------------------------------------------------------

struct Event {
  int64_t stream = 0;
};

thread_local c10::StreamId t_stream = 0;

struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device) const override { return {kNpu, 0}; }
  c10::Device getDevice() const override { return {kNpu, 0}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "parity_test_npu has one device, not ", d.index());
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::UNSAFE, {kNpu, 0}, t_stream);
  }
  c10::Stream getDefaultStream(c10::Device) const override {
    return c10::Stream(c10::Stream::DEFAULT, {kNpu, 0});
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream old(c10::Stream::UNSAFE, {kNpu, 0}, t_stream);
    t_stream = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) *event = new Event;
    static_cast<Event*>(*event)->stream = stream.id();
    g_stats.events_recorded++;
  }
  // Kernels run synchronously: whatever was queued before the record is done.
  void block(void* event, const c10::Stream&) const override {
    if (event != nullptr) g_stats.events_blocked++;
  }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override { g_stats.stream_syncs++; }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

#if __has_include(<ATen/detail/AcceleratorHooksInterface.h>)
// Torch 2.x asks "the accelerator" for its hooks where torch 1.13 asked the device guard: the
// autograd engine (torch 2.15) stashes the current stream of every device that has a primary
// context. Without a PrivateUse1 backend registered as such, a CUDA build of torch takes CUDA for
// the accelerator and fails on a host without a driver ("CUDA driver version is insufficient").
// torch_npu registers its backend ("npu") and its NPUHooksInterface; so does this device, under
// the name it already has.
struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return true; }
};

[[maybe_unused]] const bool kHooksRegistered = [] {
  c10::register_privateuse1_backend("privateuseone");
  at::RegisterPrivateUse1HooksInterface(new NpuHooks);  // held by torch for the process
  return true;
}();
#endif

// ---- kernels -----------------------------------------------------------------------------------

at::Tensor EmptyMemoryFormat(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                             c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                             c10::optional<bool> pin_memory,
                             c10::optional<at::MemoryFormat> memory_format) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, &g_allocator, keys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                        c10::optional<at::Device> device, c10::optional<bool> pin_memory) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &g_allocator, keys,
                                           c10::dtype_or_default(dtype));
}

// A device tensor seen as a CPU tensor over its read-write mapping (no copy).
struct Alias {
  at::Tensor device;  // the argument
  at::Tensor cpu;     // the CPU view of it
  const char* begin;  // its storage's read-write range
  const char* end;
};

at::Tensor CpuAlias(const at::Tensor& t, std::vector<Alias>* aliases) {
  if (!t.defined() || t.device().type() != kNpu) return t;
  const c10::Storage& storage = t.storage();
  char* base = AliasOf(storage.data());
  at::Tensor cpu = at::from_blob(base, {static_cast<int64_t>(storage.nbytes() / t.itemsize())},
                                 at::TensorOptions().dtype(t.dtype()).device(at::kCPU))
                       .as_strided(t.sizes(), t.strides(), t.storage_offset());
  aliases->push_back({t, cpu, base, base + storage.nbytes()});
  return cpu;
}

// A CPU result made a device tensor: the input itself for an in-place result, a view of the
// input's device memory for a view, else a copy into new device memory.
at::Tensor ToDevice(const at::Tensor& cpu, const std::vector<Alias>& aliases, bool to_device) {
  if (!cpu.defined() || !cpu.device().is_cpu()) return cpu;
  for (const Alias& a : aliases) {
    if (a.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return a.device;
  }
  const char* data = static_cast<const char*>(cpu.storage().data());
  for (const Alias& a : aliases) {
    if (data >= a.begin && data < a.end && cpu.dtype() == a.device.dtype()) {
      // A view of the argument's memory: the same device storage, its own geometry.
      at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
          c10::Storage(a.device.storage()), a.device.key_set(), a.device.dtype());
      const int64_t offset = (static_cast<const char*>(cpu.data_ptr()) - a.begin) /
                             static_cast<int64_t>(cpu.itemsize());
      view.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), offset);
      return view;
    }
  }
  if (!to_device) return cpu;
  // The result exactly as the kernel made it: its whole storage copied, its geometry kept (its
  // strides, a broadcast's zero strides included, decide how later kernels run).
  const c10::Storage& from = cpu.storage();
  const std::size_t bytes = from.nbytes();
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, g_allocator.allocate(bytes),
                       &g_allocator, /*resizable=*/true);
  if (bytes > 0) std::memcpy(AliasOf(storage.data()), from.data(), bytes);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(),
                                                   cpu.storage_offset());
  return out;
}

void Fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  g_stats.fallback_calls++;
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t n = schema.arguments().size();
  const std::size_t first = stack->size() - n;
  std::vector<Alias> aliases;
  bool device_tensors = false;
  std::optional<bool> explicit_device;  // a `device` argument: true for this device
  std::vector<std::string> cpu_operands;
  // An out= argument with no elements yet (a composite's empty result, as arange's): the CPU
  // kernel grows a CPU tensor of its own, and the device's is grown and filled from it after.
  struct GrownOut {
    at::Tensor device, cpu;
  };
  std::vector<GrownOut> grown;
  for (std::size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (!schema.arguments()[i].is_out() || !v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device().type() != kNpu || t.numel() != 0) continue;
    grown.push_back({t, at::empty({0}, at::TensorOptions().dtype(t.dtype()))});
    v = grown.back().cpu;
    device_tensors = true;
  }
  auto map = [&](const at::Tensor& t) {
    for (const GrownOut& g : grown) {
      if (t.unsafeGetTensorImpl() == g.cpu.unsafeGetTensorImpl()) return t;
    }
    if (t.defined() && t.device().type() == kNpu) device_tensors = true;
    if (t.defined() && t.device().is_cpu() && t.dim() > 0) {
      std::ostringstream shape;
      shape << t.sizes();
      cpu_operands.push_back(shape.str());
    }
    return CpuAlias(t, &aliases);
  };
  for (std::size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = map(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : list) out.push_back(map(t));
      v = out;
    } else if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
      c10::List<c10::IValue> list = v.toList();
      bool tensors = false;
      for (const c10::IValue& item : list) tensors = tensors || item.isTensor();
      if (tensors) {
        c10::List<c10::optional<at::Tensor>> out;
        for (const c10::IValue& item : list) {
          out.push_back(item.isTensor() ? c10::optional<at::Tensor>(map(item.toTensor()))
                                        : c10::nullopt);
        }
        v = out;
      }
    } else if (v.isDevice()) {
      const c10::Device d = v.toDevice();
      explicit_device = d.type() == kNpu;
      if (d.type() == kNpu) v = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  TORCH_CHECK(!device_tensors || cpu_operands.empty(), op.schema().name(),
              ": expected all tensors to be on the same device, but found tensors on "
              "privateuseone:0 and on cpu (shapes ",
              c10::Join(", ", cpu_operands), ")");
  const bool to_device = explicit_device.value_or(device_tensors);
  if (!to_device && device_tensors) g_stats.copies_to_host++;  // _to_copy(cpu) and the like
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.callBoxed(stack);
  }
  for (GrownOut& g : grown) {
    g.device.resize_(g.cpu.sizes());
    g.device.copy_(g.cpu);
  }
  const std::size_t m = schema.returns().size();
  for (std::size_t i = stack->size() - m; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    bool replaced = false;
    for (const GrownOut& g : grown) {
      if (v.isTensor() && v.toTensor().unsafeGetTensorImpl() == g.cpu.unsafeGetTensorImpl()) {
        v = g.device;
        replaced = true;
      }
    }
    if (replaced) continue;
    if (!to_device && device_tensors && v.isTensor() && v.toTensor().defined()) {
      g_stats.bytes_to_host += v.toTensor().numel() * v.toTensor().element_size();
    }
    if (v.isTensor()) {
      v = ToDevice(v.toTensor(), aliases, to_device);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(ToDevice(t, aliases, to_device));
      v = out;
    } else if (v.isTuple()) {
      std::vector<c10::IValue> items;
      for (const c10::IValue& item : v.toTupleRef().elements()) {
        items.push_back(item.isTensor() ? c10::IValue(ToDevice(item.toTensor(), aliases, to_device))
                                        : item);
      }
      v = c10::ivalue::Tuple::create(std::move(items));
    }
  }
}

// resize_: a backend grows a tensor's storage in its own memory (torch_npu's resize_ does), as an
// out= kernel's result is grown before the kernel writes it (arange, sum's out, cat's out).
// Contiguous sizes; the old bytes kept.
const at::Tensor& Resize(const at::Tensor& self, c10::IntArrayRef size,
                         c10::optional<at::MemoryFormat> /*memory_format*/) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const int64_t numel = c10::multiply_integers(size);
  const std::size_t needed =
      static_cast<std::size_t>(numel + impl->storage_offset()) * self.itemsize();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) {
    c10::DataPtr fresh = g_allocator.allocate(needed);
    if (storage->nbytes() > 0) {
      std::memcpy(AliasOf(fresh.get()), AliasOf(storage->data()), storage->nbytes());
    }
    storage->set_data_ptr_noswap(std::move(fresh));
    storage->set_nbytes(needed);
  }
  impl->set_sizes_contiguous(size);
  return self;
}

// copy_ between the host and the device: the host side of a copy out counts as one.
at::Tensor& Copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  std::vector<Alias> aliases;
  if (src.device().type() == kNpu && self.device().is_cpu()) {
    g_stats.copies_to_host++;
    g_stats.bytes_to_host += src.numel() * src.element_size();
  }
  at::Tensor dst = CpuAlias(self, &aliases);
  at::Tensor from = CpuAlias(src, &aliases);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    dst.copy_(from, non_blocking);
  }
  return self;
}

std::vector<int64_t> StatsOp() {
  return {g_stats.allocations.load(),    g_stats.fallback_calls.load(),
          g_stats.copies_to_host.load(), g_stats.events_recorded.load(),
          g_stats.events_blocked.load(), g_stats.stream_syncs.load(),
          g_stats.bytes_to_host.load()};
}

}  // namespace
}  // namespace parity::test_npu

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&parity::test_npu::Fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &parity::test_npu::EmptyMemoryFormat);
  m.impl("empty_strided", &parity::test_npu::EmptyStrided);
  m.impl("copy_", &parity::test_npu::Copy);
  m.impl("resize_", &parity::test_npu::Resize);
}

// [allocations, fallback calls, copies to the host, events recorded, events blocked on,
//  stream synchronisations]
TORCH_LIBRARY(parity_test_npu, m) { m.def("stats() -> int[]", &parity::test_npu::StatsOp); }

static const bool g_allocator_registered = [] {
  c10::SetAllocator(parity::test_npu::kNpu, &parity::test_npu::g_allocator);
  return true;
}();
