// RLHF.g4 - grammar of the .rlhf language. See lang/README.md.
//
// Every declaration has one shape:  KEYWORD name (':' base)? '{' property* '}'
// so the grammar stays small and the meaning of properties lives in Sema,
// which can give precise, located errors.

grammar RLHF;

program : decl* EOF ;

decl
  : importDecl
  | entityDecl
  | algorithmDecl
  | fnDecl
  | runDecl
  ;

importDecl : IMPORT STRING ';' ;

// `: hf("dir")` imports a Hugging Face checkpoint directory as the base.
entityDecl
  : kind=(HARDWARE | ARCH | CLUSTER | MODEL | DATASET) name=IDENT
    (':' base=IDENT ('(' basePath=STRING ')')?)? '{' property* '}'
  ;

// Property names may be keywords: `cluster = big;` in a run block.
property : name=(IDENT | HARDWARE | ARCH | CLUSTER | MODEL | DATASET) ('=' expr)? ';' ;

algorithmDecl
  : ALGORITHM name=IDENT '(' (param (',' param)* ','?)? ')' '{' stmt* '}'
  ;

param : name=IDENT ':' type=(IDENT | MODEL | DATASET) ;

stmt : annotation* (target=IDENT '=')? expr ';' ;

annotation : '@' name=IDENT ('(' argList? ')')? ;

// A typed tensor function: an advantage estimator, a reward shaping or a
// loss. `-> loss` makes it a loss, whose body may read `model.logprobs(seq)`.
fnDecl
  : FN name=IDENT '(' (fnParam (',' fnParam)* ','?)? ')' '->' fnResults
    '{' fnStmt* '}'
  ;

fnParam : name=IDENT ':' fnType ('=' dflt=expr)? ;

// `score[N]`, `logprobs[N, S]`, `number`, `int`.
fnType : kind=IDENT ('[' dims+=IDENT (',' dims+=IDENT)* ']')? ;

fnResults
  : fnType                                      # singleResult
  | '(' fnResult (',' fnResult)* ','? ')'       # namedResults
  ;

fnResult : name=IDENT ':' fnType ;

fnStmt
  : LET name=IDENT '=' expr ';'                 # letStmt
  | RETURN expr (',' expr)* ';'                 # returnStmt
  ;

runDecl : RUN algo=IDENT '(' argList? ')' '{' property* '}' ;

argList : arg (',' arg)* ','? ;

arg : (name=IDENT '=')? expr ;

expr
  : primary                                   # primaryExpr
  | expr '.' IDENT                            # fieldExpr
  | expr '(' argList? ')'                     # callExpr
  | expr '[' lo=expr ':' hi=expr ']'          # sliceExpr
  | '-' expr                                  # negExpr
  | expr op=('*' | '/') expr                  # mulExpr
  | expr op=('+' | '-') expr                  # addExpr
  | expr op=('<' | '<=' | '>' | '>=' | '==' | '!=') expr  # cmpExpr
  ;

primary
  : NUMBER                                    # numberLit
  | STRING                                    # stringLit
  | (TRUE | FALSE)                            # boolLit
  | name=(IDENT | MODEL)                      # nameRef
  | '(' expr ')'                              # parenExpr
  | '[' (expr (',' expr)* ','?)? ']'          # listLit
  ;

SEMI      : ';' ;
IMPORT    : 'import' ;
HARDWARE  : 'hardware' ;
ARCH      : 'arch' ;
CLUSTER   : 'cluster' ;
MODEL     : 'model' ;
DATASET   : 'dataset' ;
ALGORITHM : 'algorithm' ;
RUN       : 'run' ;
FN        : 'fn' ;
LET       : 'let' ;
RETURN    : 'return' ;
TRUE      : 'true' ;
FALSE     : 'false' ;

IDENT  : [a-zA-Z_] [a-zA-Z_0-9]* ;
// A unit suffix is part of the number: 80GiB, 3.35TBps, 989TFLOPS.
NUMBER : DIGITS ('.' DIGITS)? ([eE] [+-]? DIGITS)? [a-zA-Z]* ;
fragment DIGITS : [0-9] ('_'? [0-9])* ;
STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;
UNTERMINATED_STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* ;

LINE_COMMENT  : '//' ~[\r\n]* -> channel(HIDDEN) ;
BLOCK_COMMENT : '/*' .*? '*/' -> channel(HIDDEN) ;
// Matches only when no '*/' follows, so it never wins over BLOCK_COMMENT.
UNTERMINATED_COMMENT : '/*' (~'*' | '*'+ ~[*/])* '*'* EOF ;
WS : [ \t\r\n\f]+ -> channel(HIDDEN) ;

// Anything else becomes one token, so the lexer never fails and the parser
// reports it with a location.
ERRCHAR : . ;
