DROP TABLE agent_cards;
