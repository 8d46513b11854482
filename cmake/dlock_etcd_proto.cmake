# cmake -P dlock_etcd_proto.cmake -DINPUT=<etcd .proto> -DOUTPUT=<copy to write>
#
# Writes a copy of one of etcd's .proto files without its gogoproto and google.api decorations.
# They only steer Go code generation and the HTTP gateway: no field, number or type changes, so
# the messages are the same on the wire, and the build needs neither gogo.proto nor googleapis.
file(READ "${INPUT}" text)
# import "gogoproto/gogo.proto"; import "google/api/annotations.proto";
string(REGEX REPLACE "import \"(gogoproto|google/api)/[^\"]*\";\n" "" text "${text}")
# option (gogoproto.marshaler_all) = true;
string(REGEX REPLACE "option \\(gogoproto\\.[^;]*;\n" "" text "${text}")
# option (google.api.http) = { post: "/v3/kv/range" body: "*" };  over lines, with at most one
# level of nested blocks (additional_bindings { ... }).
string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {([^{}]*{[^{}]*})*[^{}]*};" ""
       text "${text}")
# Field options such as [(gogoproto.nullable) = false]
string(REGEX REPLACE " *\\[\\(gogoproto\\.[^]]*\\]" "" text "${text}")
if(text MATCHES "gogoproto|google\\.api")
  message(FATAL_ERROR "dlock: ${INPUT} has a gogoproto or google.api decoration this script "
                      "does not know how to strip")
endif()
file(WRITE "${OUTPUT}.tmp" "${text}")
# Unchanged copies keep their time stamps, so protoc and the compiler do not run again.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
