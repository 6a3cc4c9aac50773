#include "common/transport/call_wire.h"

#include "parity/v1/parity.pb.h"

#include <utility>

namespace parity::common {

void IdentityToWire(CallIdentity&& id, v1::ApiCall* out) {
  out->set_sequence(id.sequence);
  out->set_step(id.step);
  out->set_phase(static_cast<v1::Phase>(id.phase));
  out->set_op_name(std::move(id.op_name));
  out->set_overload(std::move(id.overload));
  out->set_call_index(id.call_index);
  out->set_forward_op_name(std::move(id.forward_op_name));
  out->set_forward_overload(std::move(id.forward_overload));
  out->set_backward_index(id.backward_index);
  out->set_autograd_node(std::move(id.autograd_node));
  out->set_autograd_sequence_nr(id.autograd_sequence_nr);
  out->set_module_path(std::move(id.module_path));
  out->set_in_optimizer(id.in_optimizer);
  out->set_skip_reason(std::move(id.skip_reason));
  out->set_capture_unix_nanos(id.capture_unix_nanos);
  out->set_api(std::move(id.api));
  out->set_api_index(id.api_index);
  out->set_drew_random(id.drew_random);
  out->set_autocast_dtype(static_cast<v1::DType>(id.autocast_dtype));
  if (id.generator) {
    v1::GeneratorState* g = out->mutable_generator();
    g->set_device_type(std::move(id.generator->device_type));
    g->set_device(static_cast<v1::GeneratorDevice>(id.generator->device));
    g->set_device_index(id.generator->device_index);
    g->set_state(std::move(id.generator->state));
    g->set_torch_version(std::move(id.generator->torch_version));
  }
}

CallIdentity IdentityFromWire(const v1::ApiCall& call) {
  CallIdentity id;
  id.sequence = call.sequence();
  id.step = call.step();
  id.phase = static_cast<wire::Phase>(call.phase());
  id.op_name = call.op_name();
  id.overload = call.overload();
  id.call_index = call.call_index();
  id.forward_op_name = call.forward_op_name();
  id.forward_overload = call.forward_overload();
  id.backward_index = call.backward_index();
  id.autograd_node = call.autograd_node();
  id.autograd_sequence_nr = call.autograd_sequence_nr();
  id.module_path = call.module_path();
  id.in_optimizer = call.in_optimizer();
  id.skip_reason = call.skip_reason();
  id.capture_unix_nanos = call.capture_unix_nanos();
  id.api = call.api();
  id.api_index = call.api_index();
  id.drew_random = call.drew_random();
  id.autocast_dtype = static_cast<wire::DType>(call.autocast_dtype());
  if (call.has_generator()) {
    const v1::GeneratorState& g = call.generator();
    id.generator =
        CallIdentity::Generator{g.device_type(), static_cast<wire::GeneratorDevice>(g.device()),
                                g.device_index(), g.state(), g.torch_version()};
  }
  return id;
}

}  // namespace parity::common
