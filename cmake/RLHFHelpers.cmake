# Helpers shared by every folder.

# ANTLR and LibTorch headers throw; LLVM is built without exceptions. Targets
# that include them compile with exceptions and RTTI, and must catch before any
# exception reaches LLVM frames.
function(rlhf_enable_exceptions target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fexceptions -frtti>)
endfunction()

# Generates the ANTLR4 C++ lexer/parser/visitor for GRAMMAR into OUTDIR and
# returns the generated .cpp files in OUT_SRCS. Debian's antlr4_generate()
# macro is broken (the jar is incomplete), so call the wrapper script.
function(rlhf_antlr_generate GRAMMAR NAMESPACE OUTDIR OUT_SRCS)
  get_filename_component(name ${GRAMMAR} NAME_WE)
  set(srcs
    ${OUTDIR}/${name}Lexer.cpp ${OUTDIR}/${name}Parser.cpp
    ${OUTDIR}/${name}Visitor.cpp ${OUTDIR}/${name}BaseVisitor.cpp)
  set(hdrs
    ${OUTDIR}/${name}Lexer.h ${OUTDIR}/${name}Parser.h
    ${OUTDIR}/${name}Visitor.h ${OUTDIR}/${name}BaseVisitor.h)
  add_custom_command(
    OUTPUT ${srcs} ${hdrs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${OUTDIR}
    COMMAND ${ANTLR4_EXECUTABLE} -Dlanguage=Cpp -visitor -no-listener
            -package ${NAMESPACE} -Xexact-output-dir -o ${OUTDIR} ${GRAMMAR}
    DEPENDS ${GRAMMAR}
    COMMENT "Generating ANTLR4 parser from ${name}.g4"
    VERBATIM)
  set(${OUT_SRCS} ${srcs} PARENT_SCOPE)
endfunction()
