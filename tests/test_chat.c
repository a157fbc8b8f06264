/*
 * test_chat.c - chat template detection and rendering against llama.cpp's own
 * expectations: every case of its tests/test-chat-template.cpp (the real Jinja
 * template as input, the native rendering it expects as output, copied here
 * as data), plus hand-derived renderings (from llama.cpp's formatter rules)
 * for the families that test does not cover, edge cases and buffer handling,
 * and every family on five conversations (odd roles, empty ones, no system
 * message, a late system message) against renderings made by llama.cpp's
 * library itself (tests/data/chat_llama_cpp.tsv).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "testutil.h"

/* llama.cpp's test conversation */
static const struct kiln_chat_msg CONV[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};
#define NCONV (sizeof CONV / sizeof *CONV)

struct peer_case {
    const char *name;     /* the model the template comes from */
    const char *family;   /* the family llama.cpp's detector picks for it */
    const char *tmpl;     /* tokenizer.chat_template */
    const char *expected; /* llama.cpp's llama_chat_apply_template output, add_ass = true */
    int n_extra;
    struct kiln_chat_msg extra[3]; /* messages appended to CONV */
};

/* From llama.cpp tests/test-chat-template.cpp (test_cases: name, template_str,
 * expected_output, extra_conversation); family per llm_chat_detect_template. */
static const struct peer_case PEER[] = {
    {"teknium/OpenHermes-2.5-Mistral-7B",
     "chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% "
     "endif %}",
     "<|im_start|>system\nYou are a helpful "
     "assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi "
     "there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant  "
     " <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n",
     0,
     {{NULL, NULL}}},
    {"mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)",
     "llama2",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == "
     "0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% "
     "endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
     "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
     "user and assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an "
     "assistant   </s>[INST] Another question [/INST]",
     0,
     {{NULL, NULL}}},
    {"TheBloke/FusionNet_34Bx2_MoE-AWQ",
     "llama2-sys-bos",
     "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' -%}\n{%- if idx > "
     "1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n{%- else -%}\n{{- "
     "messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif messages[idx]['role'] == 'system' "
     "%}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n{%- elif "
     "messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + messages[idx]['content'] + ' ' + eos_token "
     "-}}\n{% endif %}\n{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are "
     "you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]",
     0,
     {{NULL, NULL}}},
    {"bofenghuang/vigogne-2-70b-chat",
     "llama2-sys-strip",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
     "system_message = messages[0]['content'] %}{% elif true == true and not '<<SYS>>' in "
     "messages[0]['content'] %}{% set loop_messages = messages %}{% set system_message = 'Vous êtes Vigogne, "
     "un assistant IA créé par Zaion Lab. Vous suivez extrêmement bien les instructions. Aidez autant que "
     "vous le pouvez.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% "
     "endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
     "%}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif "
     "%}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message "
     "+ '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif "
     "%}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
     "message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif "
     "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
     "[/INST]I am an assistant</s>[INST] Another question [/INST]",
     0,
     {{NULL, NULL}}},
    {"mlabonne/AlphaMonarch-7B",
     "monarch",
     "{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + eos_token + "
     "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}",
     "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho "
     "are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n",
     0,
     {{NULL, NULL}}},
    {"google/gemma-7b-it",
     "gemma",
     "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif "
     "%}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
     "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
     "if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] "
     "%}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% "
     "endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
     "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n",
     0,
     {{NULL, NULL}}},
    {"OrionStarAI/Orion-14B-Chat",
     "orion",
     "{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% if message['role'] == "
     "'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: ' + eos_token }}{% elif message['role'] "
     "== 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are "
     "you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>",
     0,
     {{NULL, NULL}}},
    {"openchat/openchat-3.5-0106",
     "openchat",
     "{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + message['role'].title() + ': ' + "
     "message['content'] + '<|end_of_turn|>'}}{% endfor %}{% if add_generation_prompt %}{{ 'GPT4 Correct "
     "Assistant:' }}{% endif %}",
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct "
     "Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant: "
     "   I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct "
     "Assistant:",
     0,
     {{NULL, NULL}}},
    {"deepseek-ai/deepseek-coder-33b-instruct",
     "deepseek",
     "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% endif "
     "%}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- if "
     "message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif -%}\n{%- endfor "
     "-%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming assistant, utilizing the "
     "Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer "
     "science. For politically sensitive questions, security and privacy issues, and other non-computer "
     "science questions, you will refuse to answer\\n'}}\n{%- endif %}\n{%- for message in messages %}\n    "
     "{%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    {%- else %}\n        {%- if "
     "message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else "
     "%}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif "
     "%}\n{%- endfor %}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}",
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### "
     "Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother "
     "question\n### Response:\n",
     0,
     {{NULL, NULL}}},
    {"eachadea/vicuna-13b-1.1",
     "vicuna",
     "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + message['content'] + "
     "'\n\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + "
     "'\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- "
     "endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}",
     "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    "
     "I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
     0,
     {{NULL, NULL}}},
    {"Orca-Vicuna",
     "vicuna-orca",
     "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{-'SYSTEM: ' + message['content'] "
     "+ '\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + "
     "'\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- "
     "endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}",
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are "
     "you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
     0,
     {{NULL, NULL}}},
    {"CohereForAI/c4ai-command-r-plus",
     "command-r",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
     "system_message = messages[0]['content'] %}{% elif false == true %}{% set loop_messages = messages %}{% "
     "set system_message = 'You are Command-R, a brilliant, sophisticated, AI-assistant trained to assist "
     "human users by providing thorough responses. You are trained by Cohere.' %}{% else %}{% set "
     "loop_messages = messages %}{% set system_message = false %}{% endif %}{% if system_message != false "
     "%}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif "
     "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
     "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
     "set content = message['content'] %}{% if message['role'] == 'user' %}{{ "
     "'<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif "
     "message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + "
     "'<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}",
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful "
     "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_"
     "OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who "
     "are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an "
     "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another "
     "question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
     0,
     {{NULL, NULL}}},
    {"Llama-3",
     "llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content "
     "}}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>"
     "assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are "
     "you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother "
     "question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
     0,
     {{NULL, NULL}}},
    {"Phi-3-mini",
     "phi3",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
     "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == "
     "'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
     0,
     {{NULL, NULL}}},
    {"Phi-3-small",
     "phi3",
     "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
     "message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% "
     "else %}{{ eos_token }}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
     0,
     {{NULL, NULL}}},
    {"Phi-3-medium",
     "phi3",
     "{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
     "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == "
     "'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
     0,
     {{NULL, NULL}}},
    {"Phi-3-vision",
     "phi3",
     "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' "
     "}}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != 'assistant' %}{{- "
     "'<|assistant|>\n' -}}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
     0,
     {{NULL, NULL}}},
    {"ChatGLM3",
     "chatglm3",
     "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ "
     "message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% endif %}{% "
     "endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there<|user|>\n "
     "Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another question<|assistant|>",
     0,
     {{NULL, NULL}}},
    {"ChatGLM4",
     "chatglm4",
     "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined %}<|system|>\n你是一个名为 "
     "ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 "
     "模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具{% set tools = "
     "item['tools'] %}{% for tool in tools %}{% if tool['type'] == 'function' %}\n\n## {{ "
     "tool['function']['name'] }}\n\n{{ tool['function'] | tojson(indent=4) }}\n......{% endif %}{% endfor "
     "%}{% endif %}{% if item['content'] %}<|{{ item['role'] }}|>{{ item['metadata'] }}\n{{ item['content'] "
     "}}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho "
     "are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n",
     0,
     {{NULL, NULL}}},
    {"GLMEdge",
     "glmedge",
     "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n{{ item['content'] }}{% elif "
     "item['role'] == 'user' %}<|user|>\n{{ item['content'] }}{% elif item['role'] == 'assistant' "
     "%}<|assistant|>\n{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>",
     "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are "
     "you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>",
     0,
     {{NULL, NULL}}},
    {"MiniCPM-3B-OpenHermes-2.5-v2-GGUF",
     "minicpm",
     "{% for message in messages %}{% if message['role'] == 'user' %}{{'<用户>' + message['content'].strip() "
     "+ '<AI>'}}{% else %}{{message['content'].strip()}}{% endif %}{% endfor %}",
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an assistant<用户>Another "
     "question<AI>",
     0,
     {{NULL, NULL}}},
    {"DeepSeek-V2",
     "deepseek2",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ "
     "bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + "
     "message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + "
     "message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '\n\n' "
     "}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}",
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are "
     "you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:",
     0,
     {{NULL, NULL}}},
    {"ibm-granite/granite-3.0-8b-instruct",
     "granite",
     "{%- if tools %}\n    {{- '<|start_of_role|>available_tools<|end_of_role|>\n' }}\n    {%- for tool in "
     "tools %}\n    {{- tool | tojson(indent=4) }}\n    {%- if not loop.last %}\n        {{- '\n\n' }}\n    "
     "{%- endif %}\n    {%- endfor %}\n    {{- '<|end_of_text|>\n' }}\n{%- endif %}\n{%- for message in "
     "messages %}\n    {%- if message['role'] == 'system' %}\n    {{- "
     "'<|start_of_role|>system<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- elif "
     "message['role'] == 'user' %}\n    {{- '<|start_of_role|>user<|end_of_role|>' + message['content'] + "
     "'<|end_of_text|>\n' }}\n    {%- elif message['role'] == 'assistant' %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|>'  + message['content'] + '<|end_of_text|>\n' }}\n    {%- "
     "elif message['role'] == 'assistant_tool_call' %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\n' "
     "}}\n    {%- elif message['role'] == 'tool_response' %}\n    {{- "
     "'<|start_of_role|>tool_response<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- "
     "endif %}\n    {%- if loop.last and add_generation_prompt %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif %}\n{%- endfor %}",
     "<|start_of_role|>system<|end_of_role|>You are a helpful "
     "assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>"
     "assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are "
     "you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
     "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another "
     "question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
     0,
     {{NULL, NULL}}},
    {"mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)",
     "mistral-v1",
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    "
     "{%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- "
     "endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == "
     "'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, "
     "conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if "
     "message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            "
     "{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n "
     "           {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif "
     "message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else "
     "%}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an "
     "initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n",
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am "
     "an assistant   </s> [INST] Another question [/INST]",
     0,
     {{NULL, NULL}}},
    {"Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)",
     "mistral-v3",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] "
     "%}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
     "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set "
     "user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This "
     "block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = "
     "namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not "
     "(message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and "
     "message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 "
     "== 0) %}\n            {{- raise_exception(\"After the optional system message, conversation roles must "
     "alternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = "
     "ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages "
     "%}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == "
     "user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools "
     "%}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", "
     "\"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n        "
     "            {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' "
     "}}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n "
     "                   {%- endif %}\n                    {%- if not loop.last %}\n                        "
     "{{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- "
     "\"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                "
     "{%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor "
     "%}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls is "
     "defined and message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for "
     "tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n           "
     " {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n      "
     "          {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n    "
     "        {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not "
     "loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + "
     "eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == "
     "\"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- elif "
     "message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if "
     "message.content is defined and message.content.content is defined %}\n            {%- set content = "
     "message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n    "
     "    {%- endif %}\n        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        "
     "{%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- "
     "raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif "
     "%}\n        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n  "
     "      {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an "
     "initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
     "assistant</s>[INST] Another question[/INST]",
     0,
     {{NULL, NULL}}},
    {"Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have system prompt at start)",
     "mistral-v3-tekken",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] "
     "%}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
     "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set "
     "user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This "
     "block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = "
     "namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not "
     "(message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and "
     "message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 "
     "== 0) %}\n            {{- raise_exception(\"After the optional system message, conversation roles must "
     "alternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = "
     "ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages "
     "%}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == "
     "user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- for tool in tools "
     "%}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", "
     "\"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n        "
     "            {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' "
     "}}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n "
     "                   {%- endif %}\n                    {%- if not loop.last %}\n                        "
     "{{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- "
     "\"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                "
     "{%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor "
     "%}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif (message.tool_calls is "
     "defined and message.tool_calls is not none) %}\n        {{- \"[TOOL_CALLS][\" }}\n        {%- for "
     "tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n           "
     " {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n      "
     "          {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n    "
     "        {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not "
     "loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + "
     "eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == "
     "\"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- elif message[\"role\"] == "
     "\"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and "
     "message.content.content is defined %}\n            {%- set content = message.content.content %}\n      "
     "  {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- "
     "'[TOOL_RESULTS]{\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id "
     "is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs "
     "should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": "
     "\"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- "
     "raise_exception(\"Only user and assistant roles are supported, with the exception of an initial "
     "optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an "
     "assistant   </s>[INST]Another question[/INST]",
     0,
     {{NULL, NULL}}},
    {"mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)",
     "mistral-v7",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + "
     "message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + "
     "message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles "
     "are supported!') }}{% endif %}{% endfor %}",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who "
     "are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]",
     0,
     {{NULL, NULL}}},
    {"ai-sage/GigaChat-20B-A3B-instruct",
     "gigachat",
     "{% if messages[0]['role'] == 'system' -%}\n    {%- set loop_messages = messages[1:] -%}\n    {%- set "
     "system_message = bos_token + messages[0]['content'] + additional_special_tokens[1] -%}\n{%- else -%}\n "
     "   {%- set loop_messages = messages -%}\n    {%- set system_message = bos_token + '' -%}\n{%- endif "
     "-%}\n{%- for message in loop_messages %}\n    {% if (message['role'] == 'user') != (loop.index0 % 2 == "
     "0) %}\n        {{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}\n    {% endif %}\n    \n    {%- if loop.index0 == 0 -%}\n       "
     " {{ system_message -}}\n    {%- endif -%}\n    {%- if message['role'] == 'user' -%}\n        {{ "
     "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1] "
     "-}}\n        {{ 'available functions' + additional_special_tokens[0] + additional_special_tokens[2] + "
     "additional_special_tokens[3]  + additional_special_tokens[1] -}}\n    {%- endif -%}\n    {%- if "
     "message['role'] == 'assistant' -%}\n        {{ message['role'] + additional_special_tokens[0] + "
     "message['content'] + additional_special_tokens[1] -}}\n    {%- endif -%}\n    {%- if loop.last and "
     "add_generation_prompt -%}\n        {{ 'assistant' + additional_special_tokens[0] -}}\n    {%- endif "
     "-%}\n{%- endfor %}",
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>user<|role_sep|>Who "
     "are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>   I am an "
     "assistant   <|message_sep|>user<|role_sep|>Another question<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>",
     0,
     {{NULL, NULL}}},
    {"Infinigence/Megrez-3B-Instruct",
     "megrez",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
     "'<|role_start|>system<|role_end|>你是Megrez-3B-Instruct，将针对用户的问题给出详细的、积极的回答。<|"
     "turn_end|>' }}{% endif %}{{ '<|role_start|>' + message['role'] + '<|role_end|>' + message['content'] + "
     "'<|turn_end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|role_start|>assistant<|role_end|>' "
     "}}{% endif %}",
     "<|role_start|>system<|role_end|>You are a helpful "
     "assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_start|>assistant<|role_end|>"
     "Hi there<|turn_end|><|role_start|>user<|role_end|>Who are "
     "you<|turn_end|><|role_start|>assistant<|role_end|>   I am an assistant   "
     "<|turn_end|><|role_start|>user<|role_end|>Another "
     "question<|turn_end|><|role_start|>assistant<|role_end|>",
     0,
     {{NULL, NULL}}},
    {"phi-4",
     "phi4",
     "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + "
     "message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') "
     "%}{{'<|im_start|>user<|im_sep|>' + message['content'] + "
     "'<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') "
     "%}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
     "<|im_start|>system<|im_sep|>You are a helpful "
     "assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi "
     "there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am "
     "an assistant   <|im_end|><|im_start|>user<|im_sep|>Another "
     "question<|im_end|><|im_start|>assistant<|im_sep|>",
     0,
     {{NULL, NULL}}},
    {"yandex/YandexGPT-5-Lite-8B-instruct",
     "yandex",
     "<s>{%- set names = {'assistant': ' Ассистент:', 'user': ' Пользователь:'} %}\n{%- set tools_prefix = "
     "'Тебе доступны следующие функции:' %}\n{%- macro __render_tool(tool) %}\n    {%- set name = "
     "tool.function.name %}\n    {%- set description = tool.function.description|default('') %}\n    {%- set "
     "parameters = tool.function.parameters|tojson %}\n    {{- '\\n' }}function {{ '{' }}'name':'{{ name "
     "}}',\n    {%- if tool.function.description %}'description':'{{ description }}',{% endif "
     "%}\n'parameters':{{ parameters }}\n    {{- '}' }}\n{%- endmacro %}\n{%- macro __render_tools(tools) "
     "%}\n    {{- tools_prefix }}\n    {%- for tool in tools %}\n        {{- __render_tool(tool) }}\n    {%- "
     "endfor %}\n    {{- '\\n\\n' }}\n{%- endmacro %}\n{%- macro __render_tool_message(message) %}\n    {{- "
     "'\\n\\nРезультат вызова' }} {{ message.name }}: {{ message.content }} {{ '\\n\\n' }}\n{%- endmacro "
     "%}\n{%- if tools -%}\n    {{- __render_tools(tools) }}\n{%- endif -%}\n{%- macro "
     "__render_user_message(message) %}\n{{ names.user }} {{ message.content + '\\n\\n' }}\n{%- endmacro "
     "%}\n{%- macro __render_assistant_message(message) %}\n    {{- names.assistant }}\n    {%- set call = "
     "message['function_call'] %}\n    {%- if call %}\n        {{- '\\n[TOOL_CALL_START]' }}{{ call.name "
     "}}{{ '\\n' }}{{ call.arguments|tojson }}\n    {%- else %}\n        {{- ' ' + message.content + "
     "'\\n\\n' }}\n    {%- endif %}\n{%- endmacro %}\n{%- if not add_generation_prompt is defined %}\n{%- "
     "set add_generation_prompt = false %}\n{%- endif %}\n{%- for message in messages %}\n    {%- if "
     "message['role'] == 'user' %}\n        {{- __render_user_message(message) }}\n    {%- endif %}\n    {%- "
     "if message.role == 'assistant' and not loop.last %}\n        {{- __render_assistant_message(message) "
     "}}\n    {%- endif %}\n    {%- if message.role == 'tool' %}\n        {{- __render_tool_message(message) "
     "}}\n    {%- endif %}\n    {%- if loop.last %}\n        {{- ' Ассистент:[SEP]' }}\n    {%- endif "
     "%}\n{%- endfor %}\n",
     " Пользователь: Hello\n\n Ассистент: Hi there\n\n Пользователь: Who are you\n\n Ассистент:    I am an "
     "assistant   \n\n Пользователь: Another question\n\n Ассистент:[SEP]",
     0,
     {{NULL, NULL}}},
    {"inclusionAI/Ling-lite",
     "bailing",
     "{% for message in messages %}{% set role = message['role'] | lower %}{% if role == 'user' %}{% set "
     "role = 'HUMAN' %}{% endif %}{% set role = role | upper %}{{ '<role>' + role + '</role>' + "
     "message['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '<role>ASSISTANT</role>' }}{% endif "
     "%}",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi "
     "there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   "
     "<role>HUMAN</role>Another question<role>ASSISTANT</role>",
     0,
     {{NULL, NULL}}},
    {"ByteDance-Seed/Seed-OSS-36B-Instruct",
     "seed_oss",
     "{# <seed:bos> #}{%- for message in messages %}{%- if message.role in [\"user\", \"system\"] %}{{ "
     "bos_token + message.role + \"\\n\" + message.content + eos_token }}{%- elif message.role == "
     "\"assistant\" %}{{ bos_token + message.role }}{%- if message.content is defined and message.content is "
     "string and message.content|trim|length > 0 %}{{ \"\\n\" + message.content|trim + eos_token }}{%- endif "
     "%}{%- else %}{{ bos_token + message.role + \"\\n\" + message.content + eos_token }}{%- endif %}{%- "
     "endfor %}{%- if add_generation_prompt %}{{ bos_token + \"assistant\\n\" }}{%- endif %}",
     "<seed:bos>system\nYou are a helpful "
     "assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi "
     "there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an "
     "assistant<seed:eos><seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n",
     0,
     {{NULL, NULL}}},
    {"ibm-granite/granite-3.x (tool call)",
     "granite",
     "{%- for message in messages %}\n    {%- if message['role'] == 'assistant_tool_call' %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\\n' "
     "}}\n    {%- else %}\n    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
     "message['content'] + '<|end_of_text|>\\n' }}\n    {%- endif %}\n    {%- if loop.last and "
     "add_generation_prompt %}\n    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif "
     "%}\n{%- endfor %}",
     "<|start_of_role|>system<|end_of_role|>You are a helpful "
     "assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>"
     "assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are "
     "you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
     "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another "
     "question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the "
     "weather?<|end_of_text|>\n<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": "
     "\"get_weather\", \"arguments\": {\"location\": "
     "\"NYC\"}}]<|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": "
     "72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
     3,
     {{"user", "What is the weather?"},
      {"assistant_tool_call", "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"},
      {"tool_response", "{\"temperature\": 72}"}}},
    {"ibm-granite/granite-4.0 (tool call)",
     "granite-4.0",
     "{%- for message in messages %}\n    {%- if message['role'] == 'assistant_tool_call' %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\\n' "
     "}}\n    {%- else %}\n    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
     "message['content'] + '<|end_of_text|>\\n' }}\n    {%- endif %}\n    {%- if loop.last and "
     "add_generation_prompt %}\n    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif "
     "%}\n{%- endfor %}\n{# <tool_call> <tools> g4_default_system_message #}",
     "<|start_of_role|>system<|end_of_role|>You are a helpful "
     "assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>"
     "assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are "
     "you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
     "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another "
     "question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the "
     "weather?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n{\"name\": "
     "\"get_weather\", \"arguments\": {\"location\": "
     "\"NYC\"}}\n</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": "
     "72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
     3,
     {{"user", "What is the weather?"},
      {"assistant_tool_call",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call>"},
      {"tool_response", "{\"temperature\": 72}"}}},
    {"ibm-granite/granite-4.1 (tool call)",
     "granite-4.1",
     "{%- for message in messages %}\n    {%- if message['role'] == 'assistant_tool_call' %}\n    {{- "
     "'<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\\n' "
     "}}\n    {%- else %}\n    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
     "message['content'] + '<|end_of_text|>\\n' }}\n    {%- endif %}\n    {%- if loop.last and "
     "add_generation_prompt %}\n    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif "
     "%}\n{%- endfor %}\n{# <tool_call> <tools> #}",
     "<|start_of_role|>system<|end_of_role|>You are a helpful "
     "assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>"
     "assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are "
     "you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
     "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another "
     "question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the "
     "weather?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n{\"name\": "
     "\"get_weather\", \"arguments\": {\"location\": "
     "\"NYC\"}}\n</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": "
     "72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
     3,
     {{"user", "What is the weather?"},
      {"assistant_tool_call",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n</tool_call>"},
      {"tool_response", "{\"temperature\": 72}"}}},
};

/* Renders msgs in family t into a fresh string (sizing call first). */
static char *render(enum kiln_chat_template t, const struct kiln_chat_msg *msgs, size_t n, bool add_ass) {
    int64_t need = kiln_chat_apply(t, msgs, n, add_ass, NULL, 0);
    CHECKF(need < 0 && need != KILN_ERR_INVALID, "%s: sizing call returned %lld", kiln_chat_template_name(t),
           (long long)need);
    if (need >= 0 || need == KILN_ERR_INVALID) return NULL;
    char *buf = malloc((size_t)-need);
    int64_t len = kiln_chat_apply(t, msgs, n, add_ass, buf, (size_t)-need);
    CHECKF(len == -need - 1, "%s: length %lld after sizing %lld", kiln_chat_template_name(t), (long long)len,
           (long long)need);
    if (len != -need - 1) {
        free(buf);
        return NULL;
    }
    CHECK(strlen(buf) == (size_t)len);
    return buf;
}

static void check_render(const char *label, enum kiln_chat_template t, const struct kiln_chat_msg *msgs,
                         size_t n, bool add_ass, const char *want) {
    char *got = render(t, msgs, n, add_ass);
    CHECKF(got && strcmp(got, want) == 0, "%s (%s):\n  got  [%s]\n  want [%s]", label,
           kiln_chat_template_name(t), got ? got : "(null)", want);
    free(got);
}

static void test_peer_cases(void) {
    for (size_t i = 0; i < sizeof PEER / sizeof *PEER; i++) {
        const struct peer_case *c = &PEER[i];
        enum kiln_chat_template t = kiln_chat_template_detect(c->tmpl);
        CHECKF(strcmp(kiln_chat_template_name(t), c->family) == 0, "%s: detected %s, want %s", c->name,
               kiln_chat_template_name(t), c->family);
        struct kiln_chat_msg msgs[NCONV + 3];
        memcpy(msgs, CONV, sizeof CONV);
        for (int j = 0; j < c->n_extra; j++) msgs[NCONV + (size_t)j] = c->extra[j];
        check_render(c->name, t, msgs, NCONV + (size_t)c->n_extra, true, c->expected);
    }
}

/* Families llama.cpp's test does not render; expected strings written out by
 * hand from llama.cpp's formatter (llm_chat_apply_template) for CONV. */
static const struct {
    const char *family, *expected;
} HAND[] = {
    {"chatml",
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother "
     "question<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"llama2-sys", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                   "[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
    {"mistral-v7-tekken",
     "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>"
     "[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {"zephyr", "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n"
               "<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n"
               "<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother "
               "question<|endoftext|>\n<|assistant|>\n"},
    {"falcon3", "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi "
                "there\n<|user|>\nWho are you\n"
                "<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n"},
    {"deepseek3", "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜>"
                  "<｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜>"
                  "<｜User｜>Another question<｜Assistant｜>"},
    {"exaone3",
     "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n"
     "[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another "
     "question\n[|assistant|]"},
    {"rwkv-world",
     "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are you\n\n"
     "Assistant: I am an assistant\n\nUser: Another question\n\nAssistant:"},
    {"llama4", "<|header_start|>system<|header_end|>\n\nYou are a helpful assistant<|eot|>"
               "<|header_start|>user<|header_end|>\n\nHello<|eot|><|header_start|>assistant<|header_end|>"
               "\n\nHi there<|eot|>"
               "<|header_start|>user<|header_end|>\n\nWho are you<|eot|>"
               "<|header_start|>assistant<|header_end|>\n\nI am an assistant<|eot|>"
               "<|header_start|>user<|header_end|>\n\nAnother "
               "question<|eot|><|header_start|>assistant<|header_end|>\n\n"},
    {"smolvlm", "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant: Hi "
                "there<end_of_utterance>\n"
                "User: Who are you<end_of_utterance>\nAssistant:    I am an assistant   <end_of_utterance>\n"
                "User: Another question<end_of_utterance>\nAssistant:"},
    {"gpt-oss",
     "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|>"
     "<|start|>assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are you<|end|>"
     "<|start|>assistant<|message|>   I am an assistant   <|return|><|start|>user<|message|>Another "
     "question<|end|>"
     "<|start|>assistant"},
    {"kimi-k2",
     "<|im_system|>system<|im_middle|>You are a helpful "
     "assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|>"
     "<|im_assistant|>assistant<|im_middle|>Hi there<|im_end|><|im_user|>user<|im_middle|>Who are "
     "you<|im_end|>"
     "<|im_assistant|>assistant<|im_middle|>   I am an assistant   <|im_end|>"
     "<|im_user|>user<|im_middle|>Another question<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"grok-2", "System: You are a helpful assistant<|separator|>\n\nHuman: Hello<|separator|>\n\nAssistant: "
               "Hi there<|separator|>\n\n"
               "Human: Who are you<|separator|>\n\nAssistant:    I am an assistant   <|separator|>\n\n"
               "Human: Another question<|separator|>\n\nAssistant:"},
    {"bailing2",
     "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>Hello<|role_end|>"
     "<role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>Who are you<|role_end|>"
     "<role>ASSISTANT</role>   I am an assistant   <|role_end|><role>HUMAN</role>Another question<|role_end|>"
     "<role>ASSISTANT</role>"},
    {"hunyuan-dense",
     "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜>"
     "<｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜>"
     "<｜hy_Assistant｜>   I am an assistant   <｜hy_place▁holder▁no▁2｜>"
     "<｜hy_User｜>Another question<｜hy_Assistant｜>"},
    {"pangu-embedded", "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10]"
                       "[unused9]助手：Hi there[unused10][unused9]用户：Who are you[unused10]"
                       "[unused9]助手：   I am an assistant   [unused10][unused9]用户：Another "
                       "question[unused10][unused9]助手："},
    {"solar-open",
     "<|begin|>system<|content|>You are a helpful assistant<|end|><|begin|>user<|content|>Hello<|end|>"
     "<|begin|>assistant<|content|>Hi there<|end|><|begin|>user<|content|>Who are you<|end|>"
     "<|begin|>assistant<|content|>   I am an assistant   <|end|><|begin|>user<|content|>Another "
     "question<|end|>"
     "<|begin|>assistant"},
};

static void test_hand_cases(void) {
    for (size_t i = 0; i < sizeof HAND / sizeof *HAND; i++) {
        enum kiln_chat_template t = kiln_chat_template_from_name(HAND[i].family);
        CHECKF(t != KILN_CHAT_UNKNOWN, "no family %s", HAND[i].family);
        check_render(HAND[i].family, t, CONV, NCONV, true, HAND[i].expected);
    }

    /* unknown renders as ChatML */
    char *a = render(KILN_CHAT_UNKNOWN, CONV, NCONV, true), *b = render(KILN_CHAT_CHATML, CONV, NCONV, true);
    CHECK(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
    /* add_assistant = false leaves the opening out */
    check_render(
        "chatml no gen", KILN_CHAT_CHATML, CONV, 2, false,
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n");
    check_render("llama3 no gen", KILN_CHAT_LLAMA3, CONV + 1, 1, false,
                 "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
    /* an empty conversation */
    check_render("chatml empty", KILN_CHAT_CHATML, NULL, 0, true, "<|im_start|>assistant\n");
    check_render("bailing2 empty", KILN_CHAT_BAILING2, NULL, 0, true,
                 "<role>SYSTEM</role>detailed thinking off<|role_end|><role>ASSISTANT</role>");
    check_render("pangu empty", KILN_CHAT_PANGU_EMBED, NULL, 0, true, "[unused9]助手：");
    /* without a system message: bailing2 and pangu write their default one */
    check_render("bailing2 no system", KILN_CHAT_BAILING2, CONV + 1, 1, true,
                 "<role>SYSTEM</role>detailed thinking "
                 "off<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>");
    check_render("pangu no system", KILN_CHAT_PANGU_EMBED, CONV + 1, 1, true,
                 "[unused9]系统：[unused10][unused9]用户：Hello[unused10][unused9]助手：");
    /* rwkv ends with "Assistant:" only after a user message, whatever add_assistant says */
    check_render("rwkv after assistant", KILN_CHAT_RWKV_WORLD, CONV + 1, 2, true,
                 "User: Hello\n\nAssistant: Hi there\n\n");
    check_render("rwkv no gen", KILN_CHAT_RWKV_WORLD, CONV + 1, 1, false, "User: Hello\n\nAssistant:");
    /* gemma keeps a system message that comes before a model turn for the next user turn */
    static const struct kiln_chat_msg g[] = {
        {"user", "a"}, {"system", " s "}, {"assistant", "b"}, {"user", "c"}};
    check_render("gemma late system", KILN_CHAT_GEMMA, g, 4, true,
                 "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
                 "<start_of_turn>user\ns\n\nc<end_of_turn>\n<start_of_turn>model\n");
    /* orion: same, untrimmed, after "Human: " */
    check_render("orion late system", KILN_CHAT_ORION, g, 4, true,
                 "Human: a\n\nAssistant: </s>b</s>Human:  s \n\nc\n\nAssistant: </s>");
    /* openchat title-cases other roles; bailing upper-cases them */
    static const struct kiln_chat_msg tool[] = {{"tool", "42"}};
    check_render("openchat tool", KILN_CHAT_OPENCHAT, tool, 1, false, "GPT4 Correct Tool: 42<|end_of_turn|>");
    check_render("bailing tool", KILN_CHAT_BAILING, tool, 1, false, "<role>TOOL</role>42");
    check_render("vicuna tool dropped", KILN_CHAT_VICUNA, tool, 1, false, "");
    check_render("kimi tool", KILN_CHAT_KIMI_K2, tool, 1, false,
                 "<|im_system|>tool<|im_middle|>42<|im_end|>");
}

/* Detection from marker strings of the families the peer cases do not cover
 * (short stand-ins holding the markers llama.cpp keys on). */
static void test_detect_markers(void) {
    static const struct {
        const char *tmpl, *family;
    } D[] = {
        {"{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}", "zephyr"},
        {"{{ '<|system|>' }}{{ '<|user|>' }}{{ '<|assistant|>' }}{{ '</s>' }}", "falcon3"},
        {"<|user|><|assistant|><|tool_declare|>", "exaone-moe"},
        {"{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>'}}<｜end▁of▁sentence｜>", "deepseek3"},
        {"[|system|][|assistant|][|endofturn|]", "exaone3"},
        {"[|system|][|assistant|][|endofturn|][|tool|]", "exaone4"},
        {"rwkv-world", "rwkv-world"},
        {"<|header_start|>user<|header_end|>", "llama4"},
        {"<|im_start|>User:<end_of_utterance>", "smolvlm"},
        {"{{ message['role'] + additional_special_tokens[0] + message['content'] + "
         "additional_special_tokens[1] }}",
         "gigachat"},
        {"<|start|>assistant<|channel|>final", "gpt-oss"},
        {"<|im_assistant|>assistant<|im_middle|>", "kimi-k2"},
        {"[unused9]系统：[unused10]", "pangu-embedded"},
        {"<|begin|>assistant<|content|><|end|>", "solar-open"},
        {"<|endofuserprompt|>", "dots1"},
        {"<|extra_0|><|extra_4|>", "hunyuan-moe"},
        {"<｜hy_Assistant｜><｜hy_begin▁of▁sentence｜>", "hunyuan-vl"},
        {"<｜hy_Assistant｜><｜hy_place▁holder▁no▁3｜>", "hunyuan-dense"},
        {"<role>HUMAN</role><role>ASSISTANT</role><|role_end|>", "bailing2"},
        {"\"HUMAN\" <role>ASSISTANT</role><think>", "bailing-think"},
        {"{{ '[SYSTEM_PROMPT]' }}{{ '[INST]' }}", "mistral-v7"},
        {"mistral-v3-tekken", "mistral-v3-tekken"}, /* a family name is accepted as a template */
        {"llama3", "llama3"},
        {"{{ '[INST] ' + content }}<<SYS>>", "llama2-sys"},
        {"{{ '[INST] ' + content }}", "llama2"},
        {"{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", "unknown"},
        {"", "unknown"},
    };
    for (size_t i = 0; i < sizeof D / sizeof *D; i++) {
        const char *got = kiln_chat_template_name(kiln_chat_template_detect(D[i].tmpl));
        CHECKF(strcmp(got, D[i].family) == 0, "detect [%s]: %s, want %s", D[i].tmpl, got, D[i].family);
    }
    CHECK(kiln_chat_template_detect(NULL) == KILN_CHAT_UNKNOWN);
}

/* Every family: a name that maps back, a rendering of CONV. */
static void test_every_family(void) {
    for (int t = 0; t < KILN_CHAT_COUNT; t++) {
        const char *name = kiln_chat_template_name((enum kiln_chat_template)t);
        CHECKF(name && *name, "family %d has no name", t);
        if (t == KILN_CHAT_UNKNOWN) continue;
        CHECKF((int)kiln_chat_template_from_name(name) == t, "name %s does not map back to %d", name, t);
        CHECKF((int)kiln_chat_template_detect(name) == t, "detect(%s) != %d", name, t);
        for (int u = 1; u < t; u++)
            CHECKF(strcmp(name, kiln_chat_template_name((enum kiln_chat_template)u)) != 0, "name %s twice",
                   name);
        char *s = render((enum kiln_chat_template)t, CONV, NCONV, true);
        CHECKF(s && strstr(s, "Another question"), "%s lost the last message", name);
        free(s);
    }
    CHECK(strcmp(kiln_chat_template_name(KILN_CHAT_COUNT), "unknown") == 0);
    CHECK(kiln_chat_template_from_name("no-such-family") == KILN_CHAT_UNKNOWN);
    CHECK(kiln_chat_template_from_name(NULL) == KILN_CHAT_UNKNOWN);
}

/* The same five conversations tests/data/chat_llama_cpp_gen.c renders with
 * llama.cpp's llama_chat_apply_template (tests/data/chat_llama_cpp.tsv). */
static const struct kiln_chat_msg C3[] = {
    {"system", "  sys one  "},
    {"system", "two"},
    {"user", " hi\n"},
    {"assistant", "ok "},
    {"tool", "res"},
    {"user", "again"},
    {"assistant_tool_call", "[call]"},
    {"function", "fn"},
    {"system", " late sys "},
    {"assistant", "\tend\t"},
    {"user", ""},
};
static const struct kiln_chat_msg C4[] = {{"assistant", "first"}, {"user", "q"}};
static const struct {
    const struct kiln_chat_msg *m;
    size_t n;
} CONVS[] = {{CONV, NCONV}, {CONV + 1, 1}, {NULL, 0}, {C3, 11}, {C4, 2}};

/* undo the generator's escapes in place; false on a malformed one */
static bool unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s != '\\') {
            *o++ = *s;
            continue;
        }
        s++;
        if (*s == 'n')
            *o++ = '\n';
        else if (*s == 't')
            *o++ = '\t';
        else if (*s == '\\')
            *o++ = '\\';
        else if (*s == 'x' && s[1] && s[2]) {
            char hex[3] = {s[1], s[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            s += 2;
        } else
            return false;
    }
    *o = '\0';
    return true;
}

static void test_llama_cpp_renderings(void) {
    const char *src = getenv("KILN_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/chat_llama_cpp.tsv", src ? src : "..");
    char *text = tu_read_file(path, NULL);
    CHECKF(text != NULL, "cannot read %s (set KILN_SRC)", path);
    if (!text) return;
    int records = 0;
    bool seen[KILN_CHAT_COUNT] = {false};
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *f[4] = {line, NULL, NULL, NULL};
        for (int i = 1; i < 4; i++) {
            f[i] = f[i - 1] ? strchr(f[i - 1], '\t') : NULL;
            if (f[i]) *f[i]++ = '\0';
        }
        int conv = f[1] ? atoi(f[1]) : -1;
        CHECKF(f[3] && conv >= 0 && conv < 5 && unescape(f[3]), "malformed record %d", records);
        if (!f[3] || conv < 0 || conv >= 5) continue;
        enum kiln_chat_template t = kiln_chat_template_from_name(f[0]);
        CHECKF(t != KILN_CHAT_UNKNOWN, "llama.cpp family %s unknown to kiln", f[0]);
        seen[t] = true;
        char label[128];
        snprintf(label, sizeof label, "%s conversation %d add_ass %s", f[0], conv, f[2]);
        check_render(label, t, CONVS[conv].m, CONVS[conv].n, atoi(f[2]) != 0, f[3]);
        records++;
    }
    CHECKF(records == 550, "%d records", records);
    for (int t = 1; t < KILN_CHAT_COUNT; t++)
        CHECKF(seen[t], "no llama.cpp rendering of %s", kiln_chat_template_name((enum kiln_chat_template)t));
    free(text);
}

static void test_buffers(void) {
    static const struct kiln_chat_msg m[] = {{"user", "Hi"}};
    const char *want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    int64_t len = (int64_t)strlen(want);
    char buf[128];
    memset(buf, 'x', sizeof buf);
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, m, 1, true, buf, (size_t)len) ==
          -(len + 1));      /* no room for the NUL */
    CHECK(buf[len] == 'x'); /* nothing written past size */
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, m, 1, true, buf, (size_t)len + 1) == len);
    CHECK(strcmp(buf, want) == 0);
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, m, 1, true, NULL, 100) == -(len + 1));
    /* invalid input */
    static const struct kiln_chat_msg bad1[] = {{NULL, "x"}}, bad2[] = {{"user", NULL}};
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, bad1, 1, true, buf, sizeof buf) == KILN_ERR_INVALID);
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, bad2, 1, true, buf, sizeof buf) == KILN_ERR_INVALID);
    CHECK(kiln_chat_apply(KILN_CHAT_CHATML, NULL, 1, true, buf, sizeof buf) == KILN_ERR_INVALID);
    CHECK(kiln_chat_apply(KILN_CHAT_COUNT, m, 1, true, buf, sizeof buf) == KILN_ERR_INVALID);
    CHECK(kiln_chat_apply((enum kiln_chat_template) - 1, m, 1, true, buf, sizeof buf) == KILN_ERR_INVALID);
}

/* An assistant's tool calls as text in the native families (issue 42; written out by
 * hand from the two forms: Hermes' <tool_call> blocks, Llama 3's bare object). */
static void test_tool_calls(void) {
    static const struct kiln_chat_tool_call calls[] = {{"get_weather", "{\"city\":\"Ur\"}"}, {"now", "{}"}};
    char buf[256];
    const char *want = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Ur\"}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    int64_t len = (int64_t)strlen(want);
    CHECK(kiln_chat_tool_calls(KILN_CHAT_CHATML, calls, 2, NULL, 0) == -(len + 1));
    CHECK(kiln_chat_tool_calls(KILN_CHAT_CHATML, calls, 2, buf, sizeof buf) == len && !strcmp(buf, want));
    CHECK(kiln_chat_tool_calls(KILN_CHAT_LLAMA3, calls, 1, buf, sizeof buf) > 0 &&
          !strcmp(buf, "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Ur\"}}"));
    CHECK(kiln_chat_tool_calls(KILN_CHAT_CHATML, calls, 0, buf, sizeof buf) == 0 && buf[0] == 0);
    static const struct kiln_chat_tool_call bad[] = {{NULL, "{}"}};
    CHECK(kiln_chat_tool_calls(KILN_CHAT_CHATML, bad, 1, buf, sizeof buf) == KILN_ERR_INVALID);
    CHECK(kiln_chat_tool_calls(KILN_CHAT_COUNT, calls, 1, buf, sizeof buf) == KILN_ERR_INVALID);
}

int main(void) {
    test_tool_calls();
    test_peer_cases();
    test_hand_cases();
    test_detect_markers();
    test_every_family();
    test_buffers();
    test_llama_cpp_renderings();
    return tu_finish("test_chat");
}
